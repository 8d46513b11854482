// Private to core: the in-process first level of the two-level lock. For each (primitive,
// name) of one provider, a gate that one acquire at a time holds while it talks to the
// backend, with a FIFO of the acquires waiting for it, so that at most one local contender
// loads the server and local contenders are served in order.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <dlock/core/detail/acquire.hpp>

namespace dlock::detail {

class acquire_op;

/// The gates of one provider. Thread-safe.
class local_gates {
 public:
  /// The gate of `target`'s primitive and name.
  static std::string key_of(const lock_target& target);

  /// Enters the gate of `key` if nobody holds it (true); never queues.
  bool try_enter(const std::string& key);
  /// Enters the gate of `key` now (true) or queues `op` behind its holder (false).
  bool enter(const std::string& key, const std::shared_ptr<acquire_op>& op);
  /// Leaves the gate of `key`; returns the next queued op, which now holds it, or nullptr.
  std::shared_ptr<acquire_op> leave(const std::string& key);
  /// Removes a queued `op` from the gate of `key`; false when it was not queued (it is being
  /// handed the gate).
  bool withdraw(const std::string& key, const acquire_op* op);

 private:
  std::mutex mutex_;
  // A key is present while its gate is held; the list holds the ops waiting for it. A list,
  // not a deque: an empty deque allocates, and most gates are entered and left unqueued.
  std::unordered_map<std::string, std::list<std::shared_ptr<acquire_op>>> gates_;
};

}  // namespace dlock::detail
