// dlock/core/distributed_reader_writer_lock.hpp: shared (read) and exclusive (write) locking.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/lock_handle.hpp>
#include <dlock/core/upgradeable_lock_handle.hpp>

namespace dlock {

class provider;

/// A reader-writer lock on a name.
///
///   held now             | a reader may enter | an upgradeable read may | a writer may enter
///   ---------------------+--------------------+-------------------------+-------------------
///   nothing              | yes                | yes                     | yes
///   readers only         | yes, unless a writer is waiting (where the backend can tell) | yes | no
///   an upgradeable read  | yes                | no                      | no
///   a writer             | no                 | no                      | no
///
/// Writers do not starve on backends that queue (ZooKeeper, Redis, Postgres, memory): a
/// waiting writer blocks new readers. The file backend inherits flock(2)'s policy, which does
/// not promise this; docs/file.md says what it does.
///
/// An upgradeable read (acquire_upgradeable_read) is a read that can later become the write
/// lock (upgradeable_lock_handle::upgrade) with no writer in between; one is held at a time.
/// Writers and upgradeable reads first take the name's upgrade gate, an exclusive lock of
/// its own (docs/semantics.md, "Upgradeable reads"); plain readers do not.
///
/// Not reentrant: a holder of a plain read lock that asks for the write lock waits for
/// itself (take an upgradeable read instead). Timeouts, stop requests, async and thread
/// safety as for distributed_lock.
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

  /// As distributed_lock::try_acquire, for an upgradeable read: it shares the lock with
  /// plain readers but excludes writers and other upgradeable reads.
  [[nodiscard]] std::optional<upgradeable_lock_handle> try_acquire_upgradeable_read(
      std::chrono::nanoseconds timeout = {}, std::stop_token stop = {}) const {
    return detail::acquire_upgradeable_blocking(target_, timeout, std::move(stop), false);
  }
  /// As distributed_lock::acquire, for an upgradeable read.
  [[nodiscard]] upgradeable_lock_handle acquire_upgradeable_read(
      std::chrono::nanoseconds timeout = forever, std::stop_token stop = {}) const {
    return std::move(
        *detail::acquire_upgradeable_blocking(target_, timeout, std::move(stop), true));
  }
  /// As distributed_lock::async_try_acquire, for an upgradeable read.
  /// Completion signature: void(std::exception_ptr, std::optional<upgradeable_lock_handle>).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr,
                                                 std::optional<upgradeable_lock_handle>))
                CompletionToken>
  auto async_try_acquire_upgradeable_read(std::chrono::nanoseconds timeout, std::stop_token stop,
                                          CompletionToken&& token) const {
    detail::check_timeout(target_, timeout);
    return boost::asio::async_initiate<
        CompletionToken, void(std::exception_ptr, std::optional<upgradeable_lock_handle>)>(
        detail::initiate_acquire_upgradeable<false>{target_}, token, timeout, std::move(stop));
  }
  /// As distributed_lock::async_acquire, for an upgradeable read.
  /// Completion signature: void(std::exception_ptr, upgradeable_lock_handle).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr, upgradeable_lock_handle))
                CompletionToken>
  auto async_acquire_upgradeable_read(std::chrono::nanoseconds timeout, std::stop_token stop,
                                      CompletionToken&& token) const {
    detail::check_timeout(target_, timeout);
    return boost::asio::async_initiate<CompletionToken,
                                       void(std::exception_ptr, upgradeable_lock_handle)>(
        detail::initiate_acquire_upgradeable<true>{target_}, token, timeout, std::move(stop));
  }

  /// A copy of this lock whose grants last at most `limit` (zero: no limit; the provider's
  /// default otherwise applies). When a holder keeps it longer (an endless loop, a stuck
  /// call), its handle is marked lost and the lock is released, so others get it; see
  /// docs/semantics.md, "Maximum hold time". Throws std::invalid_argument if negative.
  [[nodiscard]] distributed_reader_writer_lock with_max_hold(std::chrono::nanoseconds limit) const {
    return distributed_reader_writer_lock(detail::with_max_hold(target_, limit));
  }

  /// A copy of this reader-writer lock whose grants carry `owner` (what inspect() shows; the
  /// provider's owner otherwise, provider::set_owner). Throws std::invalid_argument for an
  /// owner over 256 bytes or with a control character.
  [[nodiscard]] distributed_reader_writer_lock with_owner(std::string owner) const {
    return distributed_reader_writer_lock(detail::with_owner(target_, std::move(owner)));
  }

  /// As distributed_lock::is_current, for the write lock: true only while the writer's grant
  /// with `fencing_token` holds it. Readers share a name and are not offered a check.
  [[nodiscard]] bool is_current_write(std::uint64_t fencing_token) const {
    return detail::is_current(target_, fencing_token);
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
