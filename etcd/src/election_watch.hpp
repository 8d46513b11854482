// Private to dlock::etcd: word of a possible change of an election's leader for
// election_board::watch (election_board.cpp), pushed by a watch on the election's queue.
//
// Every change of the leader is a put or a delete under the queue: a candidate's key made or
// deleted (released, broken, or gone with its lease when the leader's provider died) and a
// proclaim rewriting the leader's key. So one watch of the queue's range, following every
// event, covers them all. A broken stream ends it; it is made again after a pause, and each
// time etcd has made it, the observer reads once (a change before that had no watch to see it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <dlock/core/backend/election.hpp>

namespace dlock::etcd::detail {

class etcd_backend;

class election_watch final : public std::enable_shared_from_this<election_watch> {
 public:
  /// Watches the queue `queue`; `changed` runs on the io thread.
  election_watch(const std::shared_ptr<etcd_backend>& backend, std::string queue,
                 std::function<void()> changed);

  /// Starts following (from any thread: posts to the io thread).
  void start();
  /// Stops for good: `changed` is never called after this returns. Any thread.
  void close();

 private:
  static constexpr std::chrono::milliseconds retry_pause{200};

  // io thread.
  void follow();
  void follow_later();

  std::weak_ptr<etcd_backend> backend_;
  std::string queue_;
  std::shared_ptr<watch_callback> changed_;
  std::uint64_t watch_ = 0;  // io thread
  bool closed_ = false;      // io thread
};

}  // namespace dlock::etcd::detail
