// Private to dlock::redis: an election's observers told of changes by the servers (the board's
// watch): the election's scripts PUBLISH on the leader channel (proclaim, withdraw) and the
// lock's release channel (a release, a resignation); a watch listens on both, on every node,
// over the subscriber connections the lock waiters share.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "keys.hpp"

namespace dlock::redis::detail {

class redis_backend;

/// Where an election's proclaim and withdraw publish (beside its record, in its hash tag, so
/// on the record's slot in a cluster): `keys` are the election's (keys[3] is its record).
std::string leader_channel(const key_set& keys);

/// Calls `changed` (on the network thread) whenever a node publishes on the leader or release
/// channel of `keys`, when a subscription is confirmed (anything said before it was missed),
/// and when one is lost (it listens again), until the returned object is destroyed (any
/// thread); `changed` is never called after that.
std::shared_ptr<void> watch_leader(const std::shared_ptr<redis_backend>& backend,
                                   const key_set& keys, std::function<void()> changed);

}  // namespace dlock::redis::detail
