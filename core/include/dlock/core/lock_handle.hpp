// dlock/core/lock_handle.hpp: dlock::lock_handle, the RAII value of a held lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

namespace dlock {

namespace detail {
struct held_lock;
struct handle_access;
}  // namespace detail

/// A held lock, read lock, write lock or semaphore slot: one type for every primitive.
///
/// Ownership: move-only. Destruction releases; release() releases early and is idempotent.
/// A default-constructed or moved-from handle is empty. Move assignment releases the lock
/// the target held first. A handle keeps the provider's internals alive, so it may outlive
/// the provider that created it.
///
/// Lost: lost() becomes true, lost_token() is stopped and on_lost() callbacks run once the
/// backend can no longer guarantee exclusivity (a lock file replaced, a lease not extended, a
/// session expired, a connection dropped). It is signalled within one monitoring period of
/// the backend, and at the latest once the grant's known validity has passed; never while the
/// grant is known valid. A lease or a session is known valid until a time on the monotonic
/// clock: from the sending of the last confirmed grant or renewal (for a session, of the last
/// keepalive or read its server answered) by the backend's bound, less its drift allowance
/// (docs/semantics.md has each backend's). A write lock, held as the name's upgrade gate and a
/// write grant, is known valid until the earlier of their times. lost() reads that clock
/// itself, so it turns true on time even while every thread of the provider is blocked or
/// starved; lost_token() and on_lost() follow within the wake-up latency of dlock's clock
/// thread, one per process, not the provider's. A lock file, an in-memory lock and a
/// PostgreSQL grant made on the caller's thread have no such time yet. A lost handle must
/// still be released (or destroyed), which frees whatever is left of it.
///
/// Fencing: fencing_token() strictly increases with every grant of the same name, across
/// processes and machines. Pass it to the resource you protect and let it reject tokens
/// older than the newest it has seen: that keeps the resource safe even when a paused
/// holder's lock expired underneath it.
///
/// States: empty (default-constructed, moved from, released), held, and lost (the backend
/// can no longer guarantee exclusivity, or the grant's known validity has passed: held turns
/// lost then by the clock alone; the handle still owns what is left of the grant).
///
///     operation        empty                   held                  lost
///     operator bool    false                   true                  true
///     held()           false                   true                  false
///     lost()           true                    false                 true
///     lost_token()     stopped                 not stopped           stopped
///     on_lost(f)       std::logic_error        f runs once lost      f runs soon
///     throw_if_lost()  dlock::lock_lost_error  returns               dlock::lock_lost_error
///     fencing_token()  0                       the grant's token     the grant's token
///     name()           ""                      the name              the name
///     release()        nothing                 releases, -> empty    frees the rest, -> empty
///     destructor       nothing                 releases              frees the rest
///     moved from       stays empty             -> empty, target held -> empty, target lost
///
/// release() may throw dlock::connection_error (the handle is empty afterwards anyway); the
/// destructor and move assignment report that error to the provider's error hook instead.
/// on_lost callbacks run on the provider's executor when the backend found the loss, and on
/// dlock's clock thread when the grant's validity ran out (the provider's threads may be the
/// blocked ones, and the callback does not wait for them); never on the caller's thread. Keep
/// them short: one that blocks on the clock thread delays lost_token() and on_lost() of every
/// other handle of the process (not their lost(), which reads the clock).
///
/// Thread safety: distinct objects: safe. Shared objects: only the const observers (lost(),
/// lost_token(), fencing_token(), operator bool) may be called concurrently; release(),
/// on_lost() and assignment need external synchronisation.
///
/// Memory ordering: everything the backend's monitor did before marking the handle lost
/// happens-before a lost() call that returns true (std::stop_source's guarantee); a loss by
/// the clock orders nothing but the clock.
///
///     if (auto held = lock.try_acquire(2s)) {
///       write_report(held->fencing_token(), held->lost_token());
///     }  // released here
class [[nodiscard]] lock_handle {
 public:
  /// An empty handle.
  lock_handle() noexcept;
  lock_handle(lock_handle&& other) noexcept;
  /// Releases the lock this handle held (errors go to the provider's error hook), then
  /// takes other's.
  lock_handle& operator=(lock_handle&& other) noexcept;
  lock_handle(const lock_handle&) = delete;
  lock_handle& operator=(const lock_handle&) = delete;
  /// Releases the lock if held. Never throws: a failure to tell the backend is reported to
  /// the provider's error hook.
  ~lock_handle();

  /// True when non-empty (held, or lost but not yet released).
  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// True while the lock is held: non-empty and not lost.
  bool held() const noexcept { return state_ != nullptr && !lost(); }

  /// Releases the lock now; the handle becomes empty. Idempotent.
  /// Throws: dlock::connection_error when the backend could not be told; the handle is
  /// empty afterwards anyway, and the backend frees the lock by its own means (lease
  /// expiry, session end, connection close).
  void release();

  /// True when the lock is lost (also once the grant's known validity has passed, whatever
  /// the provider's threads are doing), and on an empty handle. Never blocks.
  bool lost() const noexcept;

  /// A token that is stopped when the lock is lost (already stopped on an empty handle).
  /// Pass it to the work done under the lock so that work stops when it should.
  std::stop_token lost_token() const noexcept;

  /// Runs `callback` once when the lock is lost (soon, if it already is): on the provider's
  /// executor, or on dlock's clock thread for a grant whose validity ran out (see the class
  /// comment). Callbacks registered on a handle are dropped when it is released.
  /// Throws std::logic_error on an empty handle: it has no lock to lose, and a callback
  /// kept for nothing would never run.
  void on_lost(std::function<void()> callback);

  /// Throws dlock::lock_lost_error when lost() is true (and on an empty handle); returns
  /// otherwise. Call it just before a write that must happen only under the lock; a write
  /// that can carry fencing_token() to the resource is safer still, since the lock may be
  /// lost right after this check.
  void throw_if_lost() const;

  /// The grant's fencing token; 0 on an empty handle.
  std::uint64_t fencing_token() const noexcept;

  /// The name the lock was created with; empty on an empty handle.
  const std::string& name() const noexcept;

 private:
  friend struct detail::handle_access;
  explicit lock_handle(std::unique_ptr<detail::held_lock> state) noexcept;
  void release_reporting_errors() noexcept;

  std::unique_ptr<detail::held_lock> state_;
};

}  // namespace dlock
