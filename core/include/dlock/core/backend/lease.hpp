// dlock/core/backend/lease.hpp: the backend side of a granted lock (for backend implementers).
//
// A backend completes an acquire with a std::unique_ptr<lease>; dlock::lock_handle owns it
// and users never see it. Start with backend.hpp for the rest of the backend interface.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>

namespace dlock {

class lock_handle;

/// Until when a grant is known valid, on this process's monotonic clock: for a lease, from
/// the sending of the last confirmed grant or extension, less the backend's drift allowance;
/// for a session, from the session's last answer by the bound the backend documents
/// (docs/semantics.md). Shared by the leases it bounds, the backend's monitor that renews it
/// and core's clock, which marks the leases lost once it has passed.
///
/// Thread safety: every member, from any thread. until() happens-after the extend_to() whose
/// time it returns.
class grant_validity {
 public:
  using clock = std::chrono::steady_clock;

  explicit grant_validity(clock::time_point until) noexcept
      : until_(until.time_since_epoch().count()) {}
  /// The earlier end of `first` and `second` as they are renewed (a null one has no end): for
  /// a grant made of two, each renewed by its own monitor (core's gated lease).
  grant_validity(std::shared_ptr<const grant_validity> first,
                 std::shared_ptr<const grant_validity> second)
      : until_(clock::time_point::max().time_since_epoch().count()),
        parts_(std::make_unique<parts>(std::move(first), std::move(second))) {}

  clock::time_point until() const noexcept {
    const clock::time_point own(clock::duration(until_.load(std::memory_order_acquire)));
    if (!parts_) return own;
    return std::min({own, end_of(parts_->first.load()), end_of(parts_->second.load())});
  }
  /// True once the grant is no longer known valid.
  bool passed(clock::time_point now) const noexcept { return now >= until(); }

  /// Moves the end to `until` (a confirmed renewal); an earlier time than the present end is
  /// ignored, so a late answer to an older renewal never shortens it.
  void extend_to(clock::time_point until) noexcept {
    const clock::rep later = until.time_since_epoch().count();
    clock::rep now_until = until_.load(std::memory_order_relaxed);
    while (now_until < later &&
           !until_.compare_exchange_weak(now_until, later, std::memory_order_release,
                                         std::memory_order_relaxed)) {
    }
  }

  /// For the earlier-of-two kind only: follows `second` from now on instead (a gated grant
  /// that swapped its inner grant; null while it has none).
  void replace_second(std::shared_ptr<const grant_validity> second) noexcept {
    if (parts_) parts_->second.store(std::move(second));
  }

 private:
  struct parts {
    parts(std::shared_ptr<const grant_validity> a, std::shared_ptr<const grant_validity> b)
        : first(std::move(a)), second(std::move(b)) {}
    std::atomic<std::shared_ptr<const grant_validity>> first;
    std::atomic<std::shared_ptr<const grant_validity>> second;
  };
  static clock::time_point end_of(const std::shared_ptr<const grant_validity>& v) noexcept {
    return v ? v->until() : clock::time_point::max();
  }

  std::atomic<clock::rep> until_;
  std::unique_ptr<parts> parts_;  // null: a validity of its own
};

/// One grant of one lock at a backend.
///
/// Lost signalling: the backend's monitor calls mark_lost() when it can no longer guarantee
/// exclusivity (lease not extended, session expired, connection dropped, file replaced). It is
/// thread-safe, idempotent and never throws; handles observe it through lost_token().
///
/// Lost by the clock: a grant that is valid only for a time (a lease, a session) is made with
/// its grant_validity. lost() is then true once that time has passed, whatever the backend's
/// threads are doing, and core's clock thread stops lost_token() then (within its wake-up
/// latency) unless a renewal moved the time on. A grant without one (a lock file, a memory
/// lock) is valid until released or marked lost, and costs nothing on the clock.
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
  virtual ~lease() {
    if (clock_watch_ != 0) stop_clock_watch();
  }

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
  /// True once marked lost, or once the grant's validity has passed.
  bool lost() const noexcept {
    return lost_source_.stop_requested() ||
           (validity_ && validity_->passed(grant_validity::clock::now()));
  }
  /// Until when the grant is known valid; time_point::max() for one that does not expire by
  /// the clock. It says nothing of a loss found otherwise: lost() does.
  grant_validity::clock::time_point valid_until() const noexcept {
    return validity_ ? validity_->until() : grant_validity::clock::time_point::max();
  }
  /// The grant's validity, shared with its monitor; null for one that does not expire by the
  /// clock. For a lease made of others (core's gated lease).
  const std::shared_ptr<const grant_validity>& validity() const noexcept { return validity_; }
  std::stop_token lost_token() const noexcept { return lost_source_.get_token(); }
  /// A copy of the lost signal. A backend that finds a loss while holding a lock of its own
  /// collects these under it and calls request_stop() after unlocking: stop callbacks then
  /// run without the backend's lock held, and the lease may already be gone by then.
  std::stop_source lost_signal() const noexcept { return lost_source_; }

 protected:
  explicit lease(std::uint64_t fencing_token) noexcept : fencing_token_(fencing_token) {}
  /// A grant valid only until `validity` says (shared with the backend's monitor, which moves
  /// it on at each confirmed renewal): core's clock watches it from here on. A null
  /// `validity` is a grant that does not expire by the clock.
  /// Throws std::bad_alloc.
  lease(std::uint64_t fencing_token, std::shared_ptr<const grant_validity> validity);
  /// Replaces the token, for a lease that is granted anew while it lives (core's upgradeable
  /// reads); it must be greater than the one it replaces.
  void set_fencing_token(std::uint64_t token) noexcept {
    fencing_token_.store(token, std::memory_order_release);
  }

 private:
  /// Takes the lease off core's clock (destruction of a lease that has a validity).
  void stop_clock_watch() noexcept;

  std::atomic<std::uint64_t> fencing_token_;
  std::stop_source lost_source_;
  std::shared_ptr<const grant_validity> validity_;  // null: not bounded by the clock
  std::uint64_t clock_watch_ = 0;                   // core's clock's ticket; 0: none
};

/// The lease a handle holds, for a backend's own public helpers that need the grant's place on
/// the server (ZooKeeper's granted_node, say): cast it to the backend's lease type with
/// dynamic_cast, since the handle may come from another backend. nullptr on an empty handle.
/// The lease lives as long as the handle holds it.
const lease* granted_lease(const lock_handle& handle) noexcept;

}  // namespace dlock
