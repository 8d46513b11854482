// dlock/core/backend/random_bits.hpp: random values a backend uses to tell its grants from
// another client's (Redis's lock tokens, ZooKeeper's node-name prefixes).
#pragma once

#include <cstdint>

namespace dlock {

/// 64 random bits from a generator of the calling thread, seeded from std::random_device.
/// A child forked after its parent drew values reseeds on its first call: otherwise it would
/// draw its parent's next values, and a grant of the parent's could pass for the child's.
std::uint64_t random_bits();

}  // namespace dlock
