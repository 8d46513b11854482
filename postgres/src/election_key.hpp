// Private to dlock::postgres: the advisory key of an election's lock (docs/postgres.md).
#pragma once

#include <string>

#include <dlock/postgres/advisory_key.hpp>

namespace dlock::postgres::detail {

/// The key of the election `name`'s lock: the hashed key of "dlock-election:<name>", apart
/// from the key of the lock `name`, as the upgrade gate's is.
advisory_key election_key(const std::string& name);

/// The channel notified when the election `name`'s leader may have changed:
/// `dlock_leader_<key>`, the key of election_key() in hex, since a channel name is an
/// identifier (63 bytes at most) and an election name may be any name.
std::string leader_channel(const std::string& name);

}  // namespace dlock::postgres::detail
