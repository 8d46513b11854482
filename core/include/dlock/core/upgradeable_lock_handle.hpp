// dlock/core/upgradeable_lock_handle.hpp: an upgradeable read of a reader-writer lock, the
// handle that can turn itself into the write lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <boost/asio/async_result.hpp>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/detail/upgrade.hpp>
#include <dlock/core/durations.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

/// An upgradeable read of a distributed_reader_writer_lock: a read lock that can become the
/// write lock without letting any writer in between.
///
///   held now               | a reader | an upgradeable read | a writer
///   -----------------------+----------+---------------------+---------
///   an upgradeable read    | yes      | no                  | no
///   it, upgraded           | no       | no                  | no
///
/// At most one upgradeable read of a name is held at a time, so two upgraders never wait for
/// each other. upgrade() waits for the plain readers to leave; where the backend prefers
/// writers (docs/semantics.md) new readers wait behind it meanwhile. The fencing token rises
/// on upgrade: fencing_token() is the write grant's afterwards.
///
/// Everything lock_handle offers, with the same meaning: move-only RAII (destruction
/// releases), release(), held(), lost(), lost_token(), on_lost(), fencing_token(),
/// throw_if_lost(). The lost signal covers the upgradeable read, the upgrade and the write
/// alike: a lost_token() taken before the upgrade is stopped by a loss after it.
///
/// Invalid (std::logic_error): upgrading an empty handle (released, moved from, default), a
/// handle upgraded already, or one being upgraded by another call. Upgrading a lost handle
/// throws dlock::lock_lost_error.
///
/// Thread safety: as lock_handle; upgrade() and its twins need external synchronisation
/// with every non-const member.
///
///     dlock::upgradeable_lock_handle h = rw.acquire_upgradeable_read();
///     if (needs_change(read_catalog())) { h.upgrade(5s); write_catalog(h.fencing_token()); }
class [[nodiscard]] upgradeable_lock_handle {
 public:
  /// An empty handle.
  upgradeable_lock_handle() noexcept = default;

  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  /// True while the lock is held (read or, after upgrade, write): non-empty and not lost.
  bool held() const noexcept { return handle_.held(); }
  /// True once upgrade() succeeded: the handle holds the write lock.
  bool upgraded() const noexcept { return detail::upgraded(handle_); }

  /// As lock_handle::release(): the write or read lock, then the upgrade gate.
  void release() { handle_.release(); }
  bool lost() const noexcept { return handle_.lost(); }
  std::stop_token lost_token() const noexcept { return handle_.lost_token(); }
  void on_lost(std::function<void()> callback) { handle_.on_lost(std::move(callback)); }
  void throw_if_lost() const { handle_.throw_if_lost(); }
  /// The read grant's token, and after upgrade the (greater) write grant's.
  std::uint64_t fencing_token() const noexcept { return handle_.fencing_token(); }
  const std::string& name() const noexcept { return handle_.name(); }

  /// Turns the upgradeable read into the write lock within `timeout`: releases the read,
  /// waits for the plain readers to leave, and takes the write, holding the upgrade gate
  /// throughout so that no writer or upgradeable read gets in between.
  /// Returns: true when upgraded; false when the write was not obtained in time or a stop was
  /// requested, and the handle is again an upgradeable read (with a new, greater token).
  /// Throws: std::logic_error (see the class comment), std::invalid_argument for a negative
  /// timeout, dlock::lock_lost_error when the handle is lost (or is lost while upgrading, or
  /// its read cannot be taken back), dlock::connection_error when the backend fails (the
  /// handle is then lost). Blocks up to `timeout`.
  [[nodiscard]] bool try_upgrade(std::chrono::nanoseconds timeout = {},
                                 std::stop_token stop = {}) {
    return detail::upgrade_blocking(handle_, timeout, std::move(stop), false);
  }
  /// As try_upgrade, waiting forever by default, and throwing dlock::timeout_error or
  /// dlock::cancelled_error instead of returning false.
  void upgrade(std::chrono::nanoseconds timeout = forever, std::stop_token stop = {}) {
    (void)detail::upgrade_blocking(handle_, timeout, std::move(stop), true);
  }

  /// The async twin of try_upgrade. The read lock is released before the call returns (on
  /// the calling thread, as release() would: up to the backend's release_timeout; on the
  /// provider's own thread it is released in the background); the wait for the write holds
  /// no thread.
  /// Completion signature: void(std::exception_ptr, bool upgraded).
  /// Cancellation: the stop token, as for distributed_lock::async_try_acquire.
  /// Object lifetimes: the handle may be moved while the upgrade runs, but it must not be
  /// used otherwise until the handler runs; releasing it meanwhile makes the upgrade complete
  /// with lock_lost_error.
  /// Throws at the call: std::logic_error and std::invalid_argument as try_upgrade.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr, bool)) CompletionToken>
  auto async_try_upgrade(std::chrono::nanoseconds timeout, std::stop_token stop,
                         CompletionToken&& token) {
    detail::check_upgrade(handle_, timeout);  // thrown at the call, whatever the token
    return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, bool)>(
        detail::initiate_upgrade<false>{&handle_}, token, timeout, std::move(stop));
  }
  /// The async twin of upgrade. Completion signature: void(std::exception_ptr).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr)) CompletionToken>
  auto async_upgrade(std::chrono::nanoseconds timeout, std::stop_token stop,
                     CompletionToken&& token) {
    detail::check_upgrade(handle_, timeout);  // thrown at the call, whatever the token
    return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr)>(
        detail::initiate_upgrade<true>{&handle_}, token, timeout, std::move(stop));
  }

 private:
  friend struct detail::upgradeable_access;
  explicit upgradeable_lock_handle(lock_handle handle) noexcept : handle_(std::move(handle)) {}
  lock_handle handle_;
};

}  // namespace dlock
