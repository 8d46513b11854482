// dlock/core/distributed_semaphore.hpp: at most max_count holders of a name at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

class provider;

/// A counting semaphore: up to max_count() handles of a name are held at once.
///
///   slots held | acquire
///   -----------+------------------------------
///   < max      | granted (one slot)
///   == max     | waits until a holder releases
///
/// Invalid: using one name with two different max_count values. Backends that store the
/// count detect it and throw std::invalid_argument naming both values; docs per backend say
/// where that check cannot be made. Each handle is one slot with its own fencing token
/// (tokens of one name increase across all its slots). Not reentrant. Timeouts, stop
/// requests, async and thread safety as for distributed_lock.
///
///     auto encoders = provider->create_semaphore("encoders", 4);
///     std::optional<dlock::lock_handle> slot = encoders.try_acquire(100ms, stop);
class distributed_semaphore {
 public:
  /// As distributed_lock::try_acquire, for one slot.
  [[nodiscard]] std::optional<lock_handle> try_acquire(std::chrono::nanoseconds timeout = {},
                                                       std::stop_token stop = {}) const {
    return detail::acquire_blocking(target_, lock_mode::exclusive, timeout, std::move(stop),
                                    false);
  }
  /// As distributed_lock::acquire, for one slot.
  [[nodiscard]] lock_handle acquire(std::chrono::nanoseconds timeout = forever,
                                    std::stop_token stop = {}) const {
    return std::move(*detail::acquire_blocking(target_, lock_mode::exclusive, timeout,
                                               std::move(stop), true));
  }
  /// As distributed_lock::async_try_acquire, for one slot.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::try_acquire_signature) CompletionToken>
  auto async_try_acquire(std::chrono::nanoseconds timeout, std::stop_token stop,
                         CompletionToken&& token) const {
    return detail::async_try_acquire(target_, lock_mode::exclusive, timeout, std::move(stop),
                                     std::forward<CompletionToken>(token));
  }
  /// As distributed_lock::async_acquire, for one slot.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::acquire_signature) CompletionToken>
  auto async_acquire(std::chrono::nanoseconds timeout, std::stop_token stop,
                     CompletionToken&& token) const {
    return detail::async_acquire(target_, lock_mode::exclusive, timeout, std::move(stop),
                                 std::forward<CompletionToken>(token));
  }

  /// Free slots now: max_count minus the slots held, never negative; a snapshot that may
  /// change at once. std::nullopt when the backend cannot tell. May block for one round trip
  /// to the backend. Throws: as try_acquire (a max_count mismatch, an unreachable backend).
  [[nodiscard]] std::optional<std::uint32_t> current_count() const {
    return detail::current_count(target_);
  }

  /// A copy of this semaphore whose grants last at most `limit` (zero: no limit; the
  /// provider's default otherwise applies). When a holder keeps a slot longer (an endless
  /// loop, a stuck call), its handle is marked lost and the slot is released, so others get
  /// it; see docs/semantics.md, "Maximum hold time". Throws std::invalid_argument if negative.
  [[nodiscard]] distributed_semaphore with_max_hold(std::chrono::nanoseconds limit) const {
    return distributed_semaphore(detail::with_max_hold(target_, limit));
  }

  /// A copy of this semaphore whose grants carry `owner` (what inspect() shows; the provider's
  /// owner otherwise, provider::set_owner). Throws std::invalid_argument for an owner over 256
  /// bytes or with a control character.
  [[nodiscard]] distributed_semaphore with_owner(std::string owner) const {
    return distributed_semaphore(detail::with_owner(target_, std::move(owner)));
  }

  const std::string& name() const noexcept { return target_.name; }
  std::uint32_t max_count() const noexcept { return target_.max_count; }

 private:
  friend class provider;
  friend class lock_request;
  explicit distributed_semaphore(detail::lock_target target) : target_(std::move(target)) {}
  detail::lock_target target_;
};

}  // namespace dlock
