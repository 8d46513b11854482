// Private to dlock::zookeeper: word of a possible change of an election's leader, pushed by
// ZooKeeper watches for election_board::watch (election_board.cpp).
//
// Two watches cover every change: one on the election node's children (a candidate came or
// went, so the lowest may be another) and one on the leader's node (a proclaim writes its
// data). Each is set again after it fires, and at most one of each kind is pending: setting a
// fresh one after every event would double them with every change. While the election node
// does not exist yet, a watch on its creation stands in for the children's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "completion_routes.hpp"

namespace dlock::zookeeper::detail {

class zookeeper_backend;

class election_watch final : public std::enable_shared_from_this<election_watch> {
 public:
  /// Watches the election node `parent`; `changed` runs on the io thread after each event.
  election_watch(const std::shared_ptr<zookeeper_backend>& backend, std::string parent,
                 std::function<void()> changed);

  /// Sets the watches (from any thread: posts to the io thread).
  void start();
  /// Stops for good: `changed` is never called after this returns (a call running on the io
  /// thread finishes first). Any thread.
  void close();

  const std::string& parent() const noexcept { return parent_; }
  /// True when setting the watches failed (the session was unreachable or expired): nothing
  /// will fire until start() is called again, which the board does after its next read that
  /// reached the server.
  bool broken() const noexcept { return broken_.load(); }

 private:
  enum class target { children, parent, leader };

  // On the io thread, under mutex_ (close() waits for them, and the backend is used only
  // while the watch is open, so the provider outlives every use).
  void arm();
  void on_listing(zk_reply reply, bool set_children_watch);
  void watch_leader(const std::string& node);
  void on_event(target fired, const zk_reply& event);
  zk_handler event_handler(target fired);
  void fail_to_arm();

  std::weak_ptr<zookeeper_backend> backend_;
  std::string parent_;
  std::atomic<bool> broken_{false};

  std::mutex mutex_;
  bool open_ = true;
  std::function<void()> changed_;
  // The routes of the pending watches (0: none pending).
  std::uint64_t children_route_ = 0;
  std::uint64_t parent_route_ = 0;
  std::uint64_t leader_route_ = 0;
  std::string leader_node_;  // the node leader_route_ watches
};

}  // namespace dlock::zookeeper::detail
