// Private to core: the process's one clock thread, which marks a lease lost once its grant's
// validity has passed (lease.hpp: grant_validity), whatever the provider's threads are doing.
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>

#include <dlock/core/backend/lease.hpp>

namespace dlock::detail {

/// Stops `lost` once `validity` has passed without a renewal. Starts the clock thread at the
/// first call of the process (a process that never holds a lease bounded by the clock never
/// has one). Returns a ticket for unwatch_validity, never 0. Any thread.
/// Throws std::bad_alloc.
std::uint64_t watch_validity(std::shared_ptr<const grant_validity> validity,
                             std::stop_source lost);

/// Stops watching (the lease is gone). A loss being signalled right now finishes on the clock
/// thread. Any thread, also the clock's own.
void unwatch_validity(std::uint64_t ticket) noexcept;

/// True on the clock thread: a stop callback run there runs because the clock found a loss.
bool on_validity_clock_thread() noexcept;

}  // namespace dlock::detail
