// dlock/core/distributed_reader_writer_lock.hpp: shared (read) and exclusive (write) locking.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

class provider;

/// A reader-writer lock on a name.
///
///   held now          | a reader may enter | a writer may enter
///   ------------------+--------------------+-------------------
///   nothing           | yes                | yes
///   readers only      | yes, unless a writer is waiting (where the backend can tell) | no
///   a writer          | no                 | no
///
/// Writers do not starve on backends that queue (ZooKeeper, Redis, Postgres): a waiting
/// writer blocks new readers. The file backend inherits flock(2)'s policy, which does not
/// promise this; docs/file.md says what it does.
///
/// Not reentrant, and no upgrade: a holder of a read lock that asks for the write lock waits
/// for itself. Timeouts, stop requests, async and thread safety as for distributed_lock.
///
///     auto rw = provider->create_reader_writer_lock("catalog");
///     dlock::lock_handle r = rw.acquire_read();
///     std::optional<dlock::lock_handle> w = rw.try_acquire_write(1s);
class distributed_reader_writer_lock {
 public:
  /// As distributed_lock::try_acquire, for a shared (read) lock.
  [[nodiscard]] std::optional<lock_handle> try_acquire_read(
      std::chrono::nanoseconds timeout = {}, std::stop_token stop = {}) const {
    return detail::acquire_blocking(target_, lock_mode::shared, timeout, std::move(stop), false);
  }
  /// As distributed_lock::acquire, for a shared (read) lock.
  [[nodiscard]] lock_handle acquire_read(std::chrono::nanoseconds timeout = forever,
                                         std::stop_token stop = {}) const {
    return std::move(
        *detail::acquire_blocking(target_, lock_mode::shared, timeout, std::move(stop), true));
  }
  /// As distributed_lock::try_acquire, for the exclusive (write) lock.
  [[nodiscard]] std::optional<lock_handle> try_acquire_write(
      std::chrono::nanoseconds timeout = {}, std::stop_token stop = {}) const {
    return detail::acquire_blocking(target_, lock_mode::exclusive, timeout, std::move(stop),
                                    false);
  }
  /// As distributed_lock::acquire, for the exclusive (write) lock.
  [[nodiscard]] lock_handle acquire_write(std::chrono::nanoseconds timeout = forever,
                                          std::stop_token stop = {}) const {
    return std::move(*detail::acquire_blocking(target_, lock_mode::exclusive, timeout,
                                               std::move(stop), true));
  }

  /// As distributed_lock::async_try_acquire, for a read lock.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::try_acquire_signature) CompletionToken>
  auto async_try_acquire_read(std::chrono::nanoseconds timeout, std::stop_token stop,
                              CompletionToken&& token) const {
    return detail::async_try_acquire(target_, lock_mode::shared, timeout, std::move(stop),
                                     std::forward<CompletionToken>(token));
  }
  /// As distributed_lock::async_acquire, for a read lock.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::acquire_signature) CompletionToken>
  auto async_acquire_read(std::chrono::nanoseconds timeout, std::stop_token stop,
                          CompletionToken&& token) const {
    return detail::async_acquire(target_, lock_mode::shared, timeout, std::move(stop),
                                 std::forward<CompletionToken>(token));
  }
  /// As distributed_lock::async_try_acquire, for the write lock.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::try_acquire_signature) CompletionToken>
  auto async_try_acquire_write(std::chrono::nanoseconds timeout, std::stop_token stop,
                               CompletionToken&& token) const {
    return detail::async_try_acquire(target_, lock_mode::exclusive, timeout, std::move(stop),
                                     std::forward<CompletionToken>(token));
  }
  /// As distributed_lock::async_acquire, for the write lock.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::acquire_signature) CompletionToken>
  auto async_acquire_write(std::chrono::nanoseconds timeout, std::stop_token stop,
                           CompletionToken&& token) const {
    return detail::async_acquire(target_, lock_mode::exclusive, timeout, std::move(stop),
                                 std::forward<CompletionToken>(token));
  }

  /// A copy of this lock whose grants last at most `limit` (zero: no limit; the provider's
  /// default otherwise applies). When a holder keeps it longer (an endless loop, a stuck
  /// call), its handle is marked lost and the lock is released, so others get it; see
  /// docs/semantics.md, "Maximum hold time". Throws std::invalid_argument if negative.
  [[nodiscard]] distributed_reader_writer_lock with_max_hold(std::chrono::nanoseconds limit) const {
    return distributed_reader_writer_lock(detail::with_max_hold(target_, limit));
  }

  const std::string& name() const noexcept { return target_.name; }

 private:
  friend class provider;
  friend class lock_request;
  explicit distributed_reader_writer_lock(detail::lock_target target)
      : target_(std::move(target)) {}
  detail::lock_target target_;
};

}  // namespace dlock
