#include "election_watch.hpp"

#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "backend.hpp"
#include "key_layout.hpp"

namespace dlock::etcd::detail {

election_watch::election_watch(const std::shared_ptr<etcd_backend>& backend, std::string queue,
                               std::function<void()> changed)
    : backend_(backend),
      queue_(std::move(queue)),
      changed_(std::make_shared<watch_callback>(std::move(changed))) {}

void election_watch::start() {
  auto backend = backend_.lock();
  if (!backend) return;
  boost::asio::post(backend->executor(), [self = shared_from_this()] { self->follow(); });
}

void election_watch::close() {
  changed_->stop();
  auto backend = backend_.lock();
  if (!backend) return;
  // The watch is the io thread's: it is cancelled there (this object lives until then).
  boost::asio::post(backend->executor(), [self = shared_from_this()] {
    self->closed_ = true;
    auto backend = self->backend_.lock();
    if (backend && self->watch_) backend->watches().cancel(std::exchange(self->watch_, 0));
  });
}

void election_watch::follow() {
  auto backend = backend_.lock();
  if (closed_ || !backend) return;
  std::weak_ptr<election_watch> weak = weak_from_this();
  watch_ = backend->watches().follow(
      queue_, prefix_end(queue_),
      [weak, changed = changed_](watch_event event) {
        (*changed)();
        auto self = weak.lock();
        if (!self || event != watch_event::recheck) return;
        self->watch_ = 0;
        self->follow_later();
      },
      [changed = changed_](std::int64_t) { (*changed)(); });
}

// Right away would spin while the cluster cannot be reached (each new stream fails at once).
void election_watch::follow_later() {
  auto backend = backend_.lock();
  if (closed_ || !backend) return;
  auto timer = std::make_shared<boost::asio::steady_timer>(backend->executor(), retry_pause);
  timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!ec && self) self->follow();
  });
}

}  // namespace dlock::etcd::detail
