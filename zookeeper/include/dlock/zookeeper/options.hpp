// dlock/zookeeper/options.hpp: dlock::zookeeper::options, what a ZooKeeper provider is built
// from, and acl_policy, the ACL of the nodes it creates.
//
// provider.hpp includes this; docs/zookeeper.md describes each option and its URL form.
#pragma once

#include <chrono>
#include <string>

#include <dlock/core/durations.hpp>
#include <dlock/core/errors.hpp>

namespace dlock::zookeeper {

/// Who may do what with the nodes this provider creates (lock nodes and their parents).
/// ZooKeeper checks a delete against the parent's ACL, so protecting a lock node from others
/// means protecting its parent too; the lock nodes and every parent this provider creates get
/// this ACL (parents that exist already keep theirs).
enum class acl_policy {
  open,                   ///< world: all (ZOO_OPEN_ACL_UNSAFE), the default
  creator_only,           ///< the authenticated creator: all; nobody else anything
  read_only_for_others,   ///< the authenticated creator: all; world: read
};

/// Options of a ZooKeeper provider; validated by the provider's constructor.
struct options {
  /// The ensemble, "host:port[,host:port...]". Required.
  std::string hosts;
  /// The node under which lock names live: the lock `job` is the node `<base_path>/job`.
  /// Absolute, no trailing '/', not "/" itself. Created (as container nodes) when missing.
  std::string base_path = "/dlock";
  /// Prefixed by the client to every path (ZooKeeper's chroot), e.g. "/app"; empty for none.
  /// The chroot node must exist.
  std::string chroot;
  /// The ZooKeeper session timeout; the server may clamp it to its own [2, 20] ticks range.
  /// A holder that loses contact for this long loses its locks. At least 1 ms and at most
  /// 2^31 - 1 ms (the C client takes whole milliseconds in an int).
  std::chrono::nanoseconds session_timeout = std::chrono::seconds(15);
  /// How long the constructor waits for the first session before it throws. Limits as for
  /// session_timeout.
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(15);
  /// How long a blocking call on the provider's thread (a release, current_count()) waits for
  /// the server before it throws connection_error. Positive.
  std::chrono::nanoseconds release_timeout = dlock::default_release_timeout;
  /// Digest authentication (zoo_add_auth "digest", "user:password"); empty user for none.
  std::string user;
  std::string password;
  /// The ACL of created nodes; creator_only and read_only_for_others need `user`.
  acl_policy acl = acl_policy::open;
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

}  // namespace dlock::zookeeper
