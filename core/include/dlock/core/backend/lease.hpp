// dlock/core/backend/lease.hpp: the backend side of a granted lock (for backend implementers).
//
// A backend completes an acquire with a std::unique_ptr<lease>; dlock::lock_handle owns it
// and users never see it. Start with backend.hpp for the rest of the backend interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <stop_token>

namespace dlock {

class lock_handle;

/// One grant of one lock at a backend.
///
/// Lost signalling: the backend's monitor calls mark_lost() when it can no longer guarantee
/// exclusivity (lease not extended, session expired, connection dropped, file replaced). It is
/// thread-safe, idempotent and never throws; handles observe it through lost_token().
///
/// Thread safety: mark_lost(), lost() and lost_token() may be called from any thread at any
/// time. release() is called at most once, by the owning handle, and never concurrently with
/// destruction.
class lease {
 public:
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  /// Destroys the lease. If release() was never called the backend must release here
  /// without throwing and without waiting for the server: core destroys a grant that came
  /// after its caller gave up on the backend's own threads (the handle always calls
  /// release() first, so for a handle this is a backstop).
  virtual ~lease() = default;

  /// Releases the lock at the backend. Called at most once.
  /// Throws: dlock::connection_error if the backend could not be told; the lease counts as
  /// released locally anyway.
  virtual void release() = 0;

  /// The grant's fencing token: strictly greater than every earlier grant's of the same name.
  std::uint64_t fencing_token() const noexcept {
    return fencing_token_.load(std::memory_order_acquire);
  }

  /// Marks the lease lost. Thread-safe and idempotent.
  void mark_lost() noexcept { lost_source_.request_stop(); }
  bool lost() const noexcept { return lost_source_.stop_requested(); }
  std::stop_token lost_token() const noexcept { return lost_source_.get_token(); }
  /// A copy of the lost signal. A backend that finds a loss while holding a lock of its own
  /// collects these under it and calls request_stop() after unlocking: stop callbacks then
  /// run without the backend's lock held, and the lease may already be gone by then.
  std::stop_source lost_signal() const noexcept { return lost_source_; }

 protected:
  explicit lease(std::uint64_t fencing_token) noexcept : fencing_token_(fencing_token) {}
  /// Replaces the token, for a lease that is granted anew while it lives (core's upgradeable
  /// reads); it must be greater than the one it replaces.
  void set_fencing_token(std::uint64_t token) noexcept {
    fencing_token_.store(token, std::memory_order_release);
  }

 private:
  std::atomic<std::uint64_t> fencing_token_;
  std::stop_source lost_source_;
};

/// The lease a handle holds, for a backend's own public helpers that need the grant's place on
/// the server (ZooKeeper's granted_node, say): cast it to the backend's lease type with
/// dynamic_cast, since the handle may come from another backend. nullptr on an empty handle.
/// The lease lives as long as the handle holds it.
const lease* granted_lease(const lock_handle& handle) noexcept;

}  // namespace dlock
