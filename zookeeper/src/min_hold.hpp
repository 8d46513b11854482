// Private to dlock::zookeeper: a lock's minimum hold (acquire_request::min_hold) at ZooKeeper.
//
// ZooKeeper keeps time for a node only in a TTL node (PERSISTENT_WITH_TTL, on a server started
// with zookeeper.extendedTypesEnabled=true): the server's container manager deletes it once it
// is older than its TTL by the server's clock, looking every znode.container.checkIntervalMs.
// A grant with a hold, before it is reported, creates the TTL node `min-hold-<czxid>` beside the
// queue nodes (the czxid is the grant's fencing token), with the hold as its TTL; a waiter that
// comes first in the queue and finds one in its listing waits, with a watch, until it is gone.
// The holder deletes it itself once the hold is over by its own clock (a release before then
// leaves it to the server), so a live provider ends a hold on time and a dead one's ends within
// one check interval after it.
//
// A waiter whose one blocker goes is granted without listing again (acquire.cpp), so it must
// know from its last listing whether that blocker could leave a hold behind: an acquire that
// will take one queues as `_c_<uuid>-min-hold-lock-<seq>`. Curator, and dlock versions before
// this one, order those by the sequence after `lock-` like any other lock node, and skip the
// hold node (no marker and sequence; in Curator's ordering it sorts after every sequence).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper::detail {

class zookeeper_backend;

/// Between the protection prefix and `lock-` in the node of an acquire that takes a hold.
inline constexpr std::string_view hold_taker_mark = "min-hold-";

/// `min-hold-<czxid>`: the hold node of the grant whose node was created at `czxid`.
std::string hold_node_name(std::int64_t czxid);

/// Whether the child `name` of a lock node is a hold node.
bool is_hold_node(std::string_view name);

/// The fencing token of the grant whose hold node is `name`; nullopt for other names.
std::optional<std::uint64_t> token_of_hold_node(std::string_view name);

/// Whether the queue node `name` was made by an acquire that takes a hold.
bool takes_min_hold(std::string_view name);

/// The first of `children` that is a hold node other than `own`; nullopt when none is.
std::optional<std::string> other_hold_node(const std::vector<std::string>& children,
                                           std::string_view own);

/// The TTL of a hold of `min_hold`: whole milliseconds, rounded up (never ending it early).
std::chrono::milliseconds ttl_of(std::chrono::nanoseconds min_hold);

/// What a held lease keeps of its hold.
struct min_hold_grant {
  std::string node;  ///< the hold node's path
  /// grant + min_hold by this process's steady clock, counted from the create's answer, so no
  /// sooner than by the server's.
  std::chrono::steady_clock::time_point until;
};

/// Deletes the hold node at `hold.until`, while the provider lives (its io thread). Io thread.
void end_hold_on_time(const std::shared_ptr<zookeeper_backend>& backend,
                      const min_hold_grant& hold);

/// Why the server refuses TTL nodes, in a few words for std::invalid_argument naming the
/// server setting; empty when it takes them. Asks the server once: a TTL create under a parent
/// that does not exist, which makes nothing either way (the server checks the node type first).
/// Throws connection_error when the server does not answer within release_timeout.
std::string ask_for_ttl_nodes(const zookeeper_backend& backend);

}  // namespace dlock::zookeeper::detail
