// Private to dlock::postgres: the advisory keys and the NOTIFY channel of a semaphore.
//
// A semaphore of max_count slots is max_count consecutive bigint keys from a base derived
// from its name; a holder takes one slot and, shared, the marker key of its max_count.
#pragma once

#include <cstdint>
#include <string>

#include <dlock/postgres/advisory_key.hpp>

namespace dlock::postgres::detail {

/// Semaphores past this many slots would send very long slot lists with every attempt.
inline constexpr std::uint32_t max_semaphore_slots = 1000;

/// The key every slot of a semaphore derives from; its slots are base, base+1, ...
advisory_key semaphore_base(const std::string& name);

/// The channel a release of the semaphore notifies and its waiters listen on.
std::string channel_of(const std::string& name);

/// The shared key every holder of a slot also holds, which says which max_count it uses, so
/// a mismatch can be seen in pg_locks.
advisory_key max_count_marker(const std::string& name, std::uint32_t max_count);

}  // namespace dlock::postgres::detail
