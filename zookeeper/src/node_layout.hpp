// Private to dlock::zookeeper: Apache Curator's node names, so that dlock and Curator clients
// queue in one line on the same path.
//
// Curator's recipes create EPHEMERAL_SEQUENTIAL children named
// `_c_<uuid>-<marker><10-digit sequence>` (the `_c_<uuid>-` "protection" prefix lets a
// client find its node again after a create lost with the connection) and order them by the
// text after the marker: `lock-` (InterProcessMutex), `__READ__` / `__WRIT__`
// (InterProcessReadWriteLock), `lease-` (InterProcessSemaphoreV2's leases), `latch-`
// (LeaderLatch's candidates, whose data is the candidate's id: the lowest leads).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper::detail {

inline constexpr std::string_view lock_marker = "lock-";
inline constexpr std::string_view read_marker = "__READ__";
inline constexpr std::string_view write_marker = "__WRIT__";
inline constexpr std::string_view lease_marker = "lease-";
inline constexpr std::string_view latch_marker = "latch-";

/// The child of a name's node under which its reader-writer lock's upgrade gate queues, as
/// an InterProcessMutex of its own (`lock-` nodes). Curator's recipes on the name's node skip
/// it, as they skip a semaphore's `locks` and `leases`: it sorts after every sequence.
inline constexpr std::string_view upgrade_gate_node = "upgrade-gate";

/// A fresh `_c_<random uuid>-`: the protection prefix of one create attempt.
std::string new_protection_prefix();

/// One child of a lock node that follows the layout.
struct queued_node {
  std::string name;
  std::string sequence;  ///< the sort key: the text after the last marker
  bool excludes_readers = false;  ///< a `lock-` or `__WRIT__` node
};

/// The children that follow the layout (a marker then 10 digits), in queue order. Other
/// children (a semaphore's `leases` and `locks`, an election's `latch-` nodes, strangers'
/// nodes) are left out.
std::vector<queued_node> queue_order(const std::vector<std::string>& children);

/// The children named `<anything><marker><10 digits>`, by sequence: an election's candidates
/// (latch_marker; the first leads) or a semaphore's leases (lease_marker). Others are left out.
std::vector<queued_node> ordered_by(const std::vector<std::string>& children,
                                    std::string_view marker);

/// The last segment of the node path `path`: the child name a listing shows.
inline std::string basename_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

/// Whether `name` is a lease node of a semaphore (`...lease-<10 digits>`).
bool is_lease_node(std::string_view name);

}  // namespace dlock::zookeeper::detail
