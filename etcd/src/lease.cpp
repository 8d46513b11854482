#include "lease.hpp"

#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::etcd::detail {

held_key::held_key(std::shared_ptr<etcd_backend> backend, std::string key,
                   std::int64_t lease_id, std::int64_t create_revision, std::stop_source lost)
    : backend_(std::move(backend)),
      key_(std::move(key)),
      lease_id_(lease_id),
      create_revision_(create_revision),
      lost_(std::move(lost)) {}

void held_key::start() {
  listener_ = backend_->keeper().listen(lease_id_, [self = shared_from_this()](
                                                       std::exception_ptr) { self->lose(); });
  watch_from(create_revision_ + 1);
}

void held_key::watch_from(std::int64_t revision) {
  watch_ = backend_->watches().watch(key_, {}, revision,
                                     [self = shared_from_this()](watch_event event) {
                                       self->watch_ = 0;
                                       if (self->stopped_) return;
                                       if (event == watch_event::deleted) return self->lose();
                                       self->recheck();
                                     });
}

// The watch ended without an answer: is the key still the one we were granted?
void held_key::recheck() {
  pb::RangeRequest request;
  request.set_key(key_);
  backend_->client().range(std::move(request), [self = shared_from_this()](
                                                   grpc::Status status, pb::RangeResponse r) {
    if (self->stopped_) return;
    if (!status.ok()) {
      // Unreachable for now: the lease's keepalive decides when that means lost; look again.
      auto timer = std::make_shared<boost::asio::steady_timer>(self->backend_->executor(),
                                                               std::chrono::milliseconds(200));
      timer->async_wait([self, timer](boost::system::error_code) { self->recheck(); });
      return;
    }
    if (r.kvs_size() == 0 || r.kvs(0).create_revision() != self->create_revision_) {
      return self->lose();
    }
    self->watch_from(r.header().revision() + 1);
  });
}

void held_key::lose() {
  if (stopped_) return;
  stop();
  lost_.request_stop();
}

void held_key::stop() {
  stopped_ = true;
  if (listener_) backend_->keeper().forget(std::exchange(listener_, 0));
  if (watch_) backend_->watches().cancel(std::exchange(watch_, 0));
}

void held_key::release(std::function<void(bool, std::string)> done) {
  stop();
  backend_->delete_key(key_, lease_id_, [done = std::move(done)](grpc::Status status) {
    if (done) done(status.ok(), status.ok() ? std::string() : describe(status));
  });
}

etcd_lease::etcd_lease(std::shared_ptr<etcd_backend> backend, std::string key, std::string name,
                       std::int64_t lease_id, std::int64_t create_revision)
    : lease(static_cast<std::uint64_t>(create_revision)),
      backend_(std::move(backend)),
      held_(std::make_shared<held_key>(backend_, std::move(key), lease_id, create_revision,
                                       lost_signal())),
      name_(std::move(name)) {
  held_->start();
}

etcd_lease::~etcd_lease() {
  if (released_) return;
  boost::asio::post(backend_->executor(), [held = held_] { held->release({}); });
}

void etcd_lease::release() {
  released_ = true;
  if (backend_->running_in_this_thread()) return held_->release({});
  // The delete goes out from this thread (a blocking call that needs no help from the
  // provider's thread, which may be busy); the watch and the reservation end there.
  boost::asio::post(backend_->executor(), [held = held_] { held->stop(); });
  const grpc::Status status =
      backend_->client().remove_now(held_->key(), backend_->settings().release_timeout);
  if (status.ok() || lost()) {  // a lost key is gone, or goes with the lost lease
    boost::asio::post(backend_->executor(),
                      [backend = backend_, key = held_->key()] { backend->unreserve(key); });
    return;
  }
  // The provider's thread sends the delete again until it lands or the lease is gone.
  boost::asio::post(backend_->executor(), [backend = backend_, key = held_->key(),
                                           lease_id = held_->lease_id()] {
    backend->delete_key(key, lease_id);
  });
  throw connection_error(backend_->message(
      "release failed: " + describe(status) +
          " (the provider deletes the key when the cluster answers, or it goes with the lease)",
      name_));
}

}  // namespace dlock::etcd::detail
