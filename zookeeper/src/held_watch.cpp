#include "held_watch.hpp"

#include <optional>
#include <stop_token>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

namespace dlock::zookeeper::detail {

held_watch::held_watch(std::shared_ptr<zk_session> session,
                       boost::asio::any_io_executor executor)
    : session_(std::move(session)), executor_(std::move(executor)) {}

std::uint64_t held_watch::add(dlock::lease* lease) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = ++next_id_;
  held_.emplace(id, held_lease{lease, 0});
  return id;
}

void held_watch::remove(std::uint64_t id) {
  std::uint64_t watch_route = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(id);
    if (it == held_.end()) return;
    watch_route = it->second.watch_route;
    held_.erase(it);
  }
  // The release's own delete fires the watch; nobody needs to hear of it.
  drop_route(watch_route);
}

void held_watch::watch(std::uint64_t id, const std::string& node) {
  zk_handler on_change = [weak = weak_from_this(), id, node](zk_reply event) {
    if (auto self = weak.lock()) self->on_node_event(id, node, event.event);
  };
  std::uint64_t watch_id = 0;
  // The answer is looked at inside the client's processing, which only posts in the rare case
  // that matters: one handler less per grant.
  session_->exists(
      node,
      [weak = weak_from_this(), executor = executor_, id, node](zk_reply reply) {
        if (is_connection_loss(reply.rc)) {
          // The watch was not set: set it again once connected, or a later deletion of our
          // node would never be reported as lost.
          boost::asio::post(executor, [weak, id, node] {
            if (auto self = weak.lock()) self->watch_when_connected(id, node);
          });
          return;
        }
        // Deleted between the grant and this watch (broken at once, or the session ended).
        if (reply.rc != ZNONODE && !is_session_gone(reply.rc)) return;
        boost::asio::post(executor, [weak, id, node] {
          if (auto self = weak.lock()) self->on_node_event(id, node, ZOO_DELETED_EVENT);
        });
      },
      &on_change, &watch_id, true);
  std::lock_guard lock(mutex_);
  if (auto it = held_.find(id); it != held_.end()) it->second.watch_route = watch_id;
}

void held_watch::watch_when_connected(std::uint64_t id, const std::string& node) {
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(id);
    if (it == held_.end()) return;  // released meanwhile
    drop_route(it->second.watch_route);  // that watch never reached the server
    it->second.watch_route = 0;
  }
  // Disconnected for too long instead: every held lease is marked lost by the session clock.
  session_->when_connected([weak = weak_from_this(), id, node](std::exception_ptr error) {
    if (error) return;
    if (auto self = weak.lock()) self->watch(id, node);
  });
}

void held_watch::on_node_event(std::uint64_t id, const std::string& node, int event) {
  std::optional<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(id);
    if (it == held_.end()) return;  // released meanwhile
    if (event == ZOO_DELETED_EVENT || event == ZOO_SESSION_EVENT) {
      lost = it->second.lease->lost_signal();
    }
  }
  if (lost) {
    lost->request_stop();
    return;
  }
  watch(id, node);  // its data changed: the watch is used up, set it again
}

std::shared_ptr<held_watch::early_watch> held_watch::watch_early(
    const std::string& node, std::function<void()> deleted_while_waiting) {
  auto early = std::make_shared<early_watch>(
      early_watch{node, 0, 0, false, std::move(deleted_while_waiting)});
  std::weak_ptr<early_watch> weak_early = early;
  // The watch's route owns the state, so that the lease that adopts it need not.
  zk_handler on_change = [weak = weak_from_this(), early](zk_reply event) {
    auto self = weak.lock();
    if (!self || early->unset) return;
    if (early->held_id) return self->on_node_event(early->held_id, early->node, event.event);
    // An expiry (ZOO_SESSION_EVENT) needs nothing here while the acquire waits: the acquire
    // hears of it too (its predecessor's watch, or a call it has out) and queues again in the
    // new session, dropping this watch, so no lease adopts it (session_expiry_test.cpp).
    if (event.event == ZOO_DELETED_EVENT) early->deleted_while_waiting();
  };
  // As watch(): the answer is looked at inside the client's processing, which posts only when
  // the watch was not set.
  session_->exists(
      node,
      [weak = weak_from_this(), executor = executor_, weak_early](zk_reply reply) {
        if (reply.rc == ZOK) return;
        boost::asio::post(executor, [weak, weak_early, rc = reply.rc] {
          auto self = weak.lock();
          auto found = weak_early.lock();
          if (!self || !found || found->unset) return;
          found->unset = true;
          drop_route(found->route);
          // Adopted meanwhile: the lease watches afresh (and so learns that the node is gone).
          if (found->held_id) return self->watch(found->held_id, found->node);
          if (rc == ZNONODE) found->deleted_while_waiting();
        });
      },
      &on_change, &early->route, true);
  return early;
}

void held_watch::adopt(std::uint64_t id, early_watch& early) {
  if (early.unset) return watch(id, early.node);
  early.held_id = id;
  std::lock_guard lock(mutex_);
  if (auto it = held_.find(id); it != held_.end()) it->second.watch_route = early.route;
}

void held_watch::drop(early_watch& early) {
  early.unset = true;
  drop_route(early.route);
}

void held_watch::mark_all_lost() {
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, held] : held_) lost.push_back(held.lease->lost_signal());
  }
  // Outside the mutex: a stop callback may release its handle at once.
  for (auto& signal : lost) signal.request_stop();
}

}  // namespace dlock::zookeeper::detail
