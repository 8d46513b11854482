// Private to dlock::etcd: a lock's minimum hold (acquire_request::min_hold) at etcd.
//
// etcd keeps time only in leases, so a hold is a lease: a key outlives its release, or its
// holder's death, by sitting on a lease that the server expires no sooner than grant + min_hold.
// At grant (acquire.cpp) the provider's lease covers that already, or the key moves to a lease
// of the hold's own, and back once the hold is over; at a release before grant + min_hold
// (lease.cpp) the key moves to a fresh lease of the time left. A move is a put of the same
// value in a Txn guarded by the key's create revision: the revision, so the queue's order and
// the fencing token, stay; a watcher of the key sees a PUT, which neither dlock nor
// concurrency.Mutex takes for a delete.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "client.hpp"

namespace dlock::etcd::detail {

class etcd_backend;

/// What a grant keeps of its minimum hold, for its release.
struct min_hold_state {
  /// grant + min_hold by this process's steady clock, read once the grant's answer came (so no
  /// sooner than by the server's); time_point::min() for a grant with no hold.
  std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::min();
  std::string value;          ///< the key's value, put again when the key moves
  std::int64_t lease_id = 0;  ///< the hold's own lease the key moved to at grant, or 0
};

/// Whole seconds, rounded up (a lease's TTL must not end the hold early).
std::int64_t seconds_up(std::chrono::nanoseconds d);

/// The Txn that moves `key` onto `lease_id` if it is still the key created at
/// `create_revision`: the same value, the same create revision.
pb::TxnRequest move_key(const std::string& key, std::int64_t create_revision,
                        const std::string& value, std::int64_t lease_id);

/// Moves the released `key` (created at `create_revision`, on lease `key_lease`) to a fresh
/// lease that lasts until `hold.until`, lets go of hold.lease_id, frees the key's reservation,
/// then calls `done` (io thread) with whether etcd confirmed and what failed. A call that fails
/// transiently is made again every 200 ms, after `done`, while `key_lease` is kept (the key
/// would stay held as long); a key no longer ours is left alone. io thread.
void keep_until_hold_ends(std::shared_ptr<etcd_backend> backend, std::string key,
                          std::int64_t create_revision, std::int64_t key_lease,
                          min_hold_state hold,
                          std::function<void(bool confirmed, std::string failure)> done);

/// Revokes lease `lease_id` without waiting for the answer (a hold's lease that carries
/// nothing any more, or only a key that is to go). io thread.
void revoke_later(etcd_backend& backend, std::int64_t lease_id);

}  // namespace dlock::etcd::detail
