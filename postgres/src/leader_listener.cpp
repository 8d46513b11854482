#include "leader_listener.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sql.hpp"

namespace dlock::postgres::detail {

leader_listener::leader_listener(boost::asio::any_io_executor executor, const options& opts,
                                 std::string endpoint)
    : executor_(std::move(executor)),
      parameters_(opts),
      endpoint_(std::move(endpoint)),
      connect_timeout_(opts.connect_timeout) {}

std::shared_ptr<void> leader_listener::subscribe(const std::string& channel,
                                                 std::function<void()> changed) {
  auto watch = std::make_shared<watch_callback>(std::move(changed));
  {
    std::lock_guard lock(mutex_);
    watches_[channel].push_back(watch);
  }
  // Also for a channel listened to already: the LISTEN's answer tells the new watch to read,
  // since a NOTIFY between its observer's first read and now reached nobody.
  boost::asio::post(executor_, [weak = weak_from_this(), channel] {
    if (auto self = weak.lock()) self->listen(channel);
  });
  return std::shared_ptr<void>(watch.get(), [weak = weak_from_this(), channel, watch](void*) {
    watch->stop();
    if (auto self = weak.lock()) self->unsubscribe(channel, watch);
  });
}

void leader_listener::unsubscribe(const std::string& channel,
                                  const std::shared_ptr<watch_callback>& watch) {
  {
    std::lock_guard lock(mutex_);
    auto it = watches_.find(channel);
    if (it == watches_.end()) return;
    std::erase(it->second, watch);
    if (!it->second.empty()) return;
    watches_.erase(it);
  }
  boost::asio::post(executor_, [weak = weak_from_this(), channel] {
    if (auto self = weak.lock()) self->unlisten(channel);
  });
}

void leader_listener::listen(const std::string& channel) {
  {
    std::lock_guard lock(mutex_);
    if (!watches_.contains(channel)) return;  // unsubscribed meanwhile
  }
  if (!session_) open_session();
  session_->execute(listen_sql(channel), [weak = weak_from_this(), channel,
                                          generation = generation_](query_result r) {
    auto self = weak.lock();
    if (!self) return;
    if (r.ok()) return self->tell(channel);
    if (r.connection_broken) self->session_lost(generation);
  });
}

void leader_listener::unlisten(const std::string& channel) {
  bool none_left = false;
  {
    std::lock_guard lock(mutex_);
    if (watches_.contains(channel)) return;  // subscribed again meanwhile
    none_left = watches_.empty();
  }
  if (!session_) return;
  if (none_left) {
    // Nothing watched: no session held at the server for nothing.
    session_->close();
    session_.reset();
    return;
  }
  session_->execute(unlisten_sql(channel), [](query_result) {});
}

void leader_listener::open_session() {
  session_ = std::make_shared<pg_connection>(executor_, endpoint_);
  const std::uint64_t generation = ++generation_;
  std::weak_ptr<leader_listener> weak = weak_from_this();
  session_->connect(
      parameters_.keywords(), parameters_.values(), connect_timeout_,
      [weak, generation] {
        if (auto self = weak.lock()) self->session_lost(generation);
      },
      [weak](const std::string& channel) {
        if (auto self = weak.lock()) self->tell(channel);
      });
}

// Every channel is listened to again after a pause (at once would spin while the server is
// down), and every watch told now: NOTIFYs sent meanwhile reach nobody.
void leader_listener::session_lost(std::uint64_t generation) {
  if (generation != generation_ || !session_) return;  // an older session, or already handled
  session_->close();
  session_.reset();
  tell_all();
  if (std::exchange(reconnecting_, true)) return;
  auto timer = std::make_shared<boost::asio::steady_timer>(executor_, reconnect_pause);
  timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->reconnecting_ = false;
    std::vector<std::string> channels;
    {
      std::lock_guard lock(self->mutex_);
      for (const auto& [channel, watches] : self->watches_) channels.push_back(channel);
    }
    for (const std::string& channel : channels) self->listen(channel);
  });
}

void leader_listener::tell(const std::string& channel) {
  std::vector<std::shared_ptr<watch_callback>> told;
  {
    std::lock_guard lock(mutex_);
    if (auto it = watches_.find(channel); it != watches_.end()) told = it->second;
  }
  for (const auto& watch : told) (*watch)();
}

void leader_listener::tell_all() {
  std::vector<std::shared_ptr<watch_callback>> told;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [channel, watches] : watches_) {
      told.insert(told.end(), watches.begin(), watches.end());
    }
  }
  for (const auto& watch : told) (*watch)();
}

void leader_listener::close() {
  if (session_) session_->close();
  session_.reset();
}

}  // namespace dlock::postgres::detail
