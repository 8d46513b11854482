#include "election_watch.hpp"

#include <utility>

#include <boost/asio/post.hpp>

#include "backend.hpp"
#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

election_watch::election_watch(const std::shared_ptr<zookeeper_backend>& backend,
                               std::string parent, std::function<void()> changed)
    : backend_(backend), parent_(std::move(parent)), changed_(std::move(changed)) {}

void election_watch::start() {
  auto backend = backend_.lock();
  if (!backend) return;
  boost::asio::post(backend->executor(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    std::lock_guard lock(self->mutex_);
    self->arm();
  });
}

void election_watch::close() {
  std::lock_guard lock(mutex_);
  open_ = false;
  // Their events, if any come, find no route.
  for (std::uint64_t* route : {&children_route_, &parent_route_, &leader_route_}) {
    if (*route) drop_route(std::exchange(*route, 0));
  }
}

zk_handler election_watch::event_handler(target fired) {
  return [weak = weak_from_this(), fired](zk_reply event) {
    if (auto self = weak.lock()) self->on_event(fired, event);
  };
}

void election_watch::arm() {
  if (!open_) return;
  auto backend = backend_.lock();
  if (!backend) return;
  broken_ = false;
  const bool set_children_watch = children_route_ == 0;
  zk_handler on_change = event_handler(target::children);
  backend->session().get_children(
      parent_,
      [weak = weak_from_this(), set_children_watch](zk_reply reply) {
        auto self = weak.lock();
        if (!self) return;
        std::lock_guard lock(self->mutex_);
        self->on_listing(std::move(reply), set_children_watch);
      },
      set_children_watch ? &on_change : nullptr, &children_route_);
}

void election_watch::on_listing(zk_reply reply, bool set_children_watch) {
  if (!open_) return;
  // A failed listing sets no watch: its route would never be used.
  if (reply.rc != ZOK && set_children_watch && children_route_) {
    drop_route(std::exchange(children_route_, 0));
  }
  if (reply.rc == ZNONODE) {
    // No candidate yet: the first one's create makes the node, which this watch sees.
    if (parent_route_ != 0) return;
    auto backend = backend_.lock();
    if (!backend) return;
    zk_handler on_created = event_handler(target::parent);
    backend->session().exists(
        parent_,
        [weak = weak_from_this()](zk_reply answer) {
          auto self = weak.lock();
          if (!self) return;
          std::lock_guard lock(self->mutex_);
          if (answer.rc == ZOK) return self->arm();  // made meanwhile: list it
          if (answer.rc != ZNONODE) self->fail_to_arm();
        },
        &on_created, &parent_route_);
    return;
  }
  if (reply.rc != ZOK) return fail_to_arm();
  const auto candidates = ordered_by(reply.children, latch_marker);
  if (candidates.empty()) return;
  watch_leader(parent_ + "/" + candidates.front().name);
}

void election_watch::watch_leader(const std::string& node) {
  if (leader_route_ != 0 && leader_node_ == node) return;
  // The leader we watched has gone (its deletion is the children's event too).
  if (leader_route_ != 0) drop_route(std::exchange(leader_route_, 0));
  auto backend = backend_.lock();
  if (!backend) return;
  leader_node_ = node;
  zk_handler on_change = event_handler(target::leader);
  backend->session().exists(
      node,
      [weak = weak_from_this(), node](zk_reply answer) {
        auto self = weak.lock();
        if (!self) return;
        std::lock_guard lock(self->mutex_);
        if (self->leader_node_ != node || self->leader_route_ == 0) return;
        if (answer.rc == ZOK) {
          // The leader may have written its record (in another session) before this watch
          // was set, which nothing would push: a read now sees it; later writes fire the watch.
          if (self->open_) self->changed_();
          return;
        }
        // Gone already (the children's watch tells of that) or not set: nothing to wait for.
        drop_route(std::exchange(self->leader_route_, 0));
        if (answer.rc != ZNONODE) self->fail_to_arm();
      },
      &on_change, &leader_route_);
}

void election_watch::on_event(target fired, const zk_reply& event) {
  std::lock_guard lock(mutex_);
  if (!open_) return;
  switch (fired) {
    case target::children: children_route_ = 0; break;
    case target::parent: parent_route_ = 0; break;
    case target::leader: leader_route_ = 0; break;
  }
  changed_();
  if (event.event == ZOO_SESSION_EVENT) {
    // The session expired with every watch of it: set them all again in the next one.
    for (std::uint64_t* route : {&children_route_, &parent_route_, &leader_route_}) {
      if (*route) drop_route(std::exchange(*route, 0));
    }
  }
  arm();
}

void election_watch::fail_to_arm() { broken_ = true; }

}  // namespace dlock::zookeeper::detail
