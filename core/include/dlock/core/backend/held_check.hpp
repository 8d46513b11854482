// dlock/core/backend/held_check.hpp: for a program that wakes up on its own while it holds locks
// (the dlock command waits for its command anyway), the loss check of its held locks on its own
// thread instead of the provider's, so that holding a lock starts no thread. Not part of the
// user API: a service leaves loss detection to the provider (lock_handle::lost, on_lost).
#pragma once

#include <chrono>
#include <optional>

namespace dlock {

class provider;

/// What a backend offers through backend::as_caller_loss_check(): the periodic loss check of
/// its held locks, made by the caller instead of the backend's thread (the file backend).
class caller_loss_check {
 public:
  virtual ~caller_loss_check() = default;
  /// From now on the backend leaves the periodic check to check_held_locks(), which the
  /// caller calls at least once per returned period; nullopt when it cannot now.
  virtual std::optional<std::chrono::nanoseconds> check_held_by_caller() = 0;
  /// Checks every held lock for loss now, on the calling thread (any thread), marking the
  /// lost ones lost. Called only after check_held_by_caller() returned a period.
  virtual void check_held_locks() = 0;
};

/// From now on `p` stops checking its held locks for loss on a thread of its own and leaves the
/// periodic check to check_held_locks(p), which the caller promises to call at least once per
/// returned period. Returns std::nullopt, and changes nothing, for a backend whose loss
/// detection needs its own thread (every networked one: sessions, lease extensions, watches at
/// a server); the file backend returns its monitor_period. Call it before the first grant: a
/// lock granted earlier may go on being checked on the provider's thread as well. A loss found
/// otherwise (the file backend's directory watch, a maximum hold time) is still found as
/// before. Thread-safe.
std::optional<std::chrono::nanoseconds> check_held_by_caller(provider& p);

/// The check itself, on the calling thread: every held lock found lost is marked lost
/// (lock_handle::lost(), on_lost callbacks) before it returns. Only after
/// check_held_by_caller(p) returned a period (else it does nothing). Thread-safe.
void check_held_locks(provider& p);

}  // namespace dlock
