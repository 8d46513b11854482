// Private to dlock::postgres: the advisory key of a reader-writer lock's upgrade gate, the
// exclusive lock that its writers and upgradeable reads take first (docs/postgres.md).
#pragma once

#include <string>

#include <dlock/postgres/advisory_key.hpp>

namespace dlock::postgres::detail {

/// The key of `name`'s upgrade gate: the hashed key of "dlock-upgrade-gate:<name>", as a
/// semaphore's base is that of "dlock-semaphore:<name>".
advisory_key upgrade_gate_key(const std::string& name);

}  // namespace dlock::postgres::detail
