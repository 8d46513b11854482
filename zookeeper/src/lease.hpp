// Private to dlock::zookeeper: a grant, the node an acquire created, watched until released.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <dlock/core/backend/lease.hpp>

#include "held_watch.hpp"
#include "min_hold.hpp"

namespace dlock::zookeeper::detail {

class zookeeper_backend;

/// A granted node, watched until it is released: deleted by someone else, it is lost.
/// Its fencing token is the node's czxid. A grant with a minimum hold also has its hold node
/// (min_hold.hpp), deleted at the hold's end: by a timer while the provider lives, or with
/// the lease's node when that goes later.
class zookeeper_lease final : public dlock::lease {
 public:
  /// Starts watching `node`, or adopts `early`, the watch its acquire set on it while waiting
  /// (call on the io thread).
  zookeeper_lease(std::shared_ptr<zookeeper_backend> backend, std::string node,
                  std::string name, std::int64_t czxid,
                  std::shared_ptr<held_watch::early_watch> early = nullptr,
                  std::optional<min_hold_grant> hold = std::nullopt);
  /// Deletes the node without waiting, if release() did not.
  ~zookeeper_lease() override;

  /// Deletes the node: waits (off the io thread) up to release_timeout for the answer.
  /// Throws connection_error when it could not be confirmed. Before the hold's end its hold
  /// node stays, and the name stays held until the server or the timer deletes that.
  void release() override;

  /// The node's full path (without chroot).
  const std::string& node() const noexcept { return node_; }

  /// The version of the node's data as this grant last wrote it (an election's proclaim),
  /// or -1 once a write's outcome is unknown.
  std::int32_t data_version() const noexcept { return data_version_.load(); }
  void set_data_version(std::int32_t version) const noexcept { data_version_.store(version); }

 private:
  std::shared_ptr<zookeeper_backend> backend_;
  std::string node_;
  std::string name_;
  std::optional<min_hold_grant> hold_;
  std::uint64_t held_id_ = 0;
  bool released_ = false;

  /// Deletes the hold node if the hold is over, ahead of the lease's node (the server runs a
  /// session's calls in order, so a waiter never sees the one go without the other).
  void end_hold_if_over();
  // Written through the const lease an election board is given.
  mutable std::atomic<std::int32_t> data_version_{0};
};

}  // namespace dlock::zookeeper::detail
