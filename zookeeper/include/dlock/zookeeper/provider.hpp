// dlock/zookeeper/provider.hpp: dlock::zookeeper::provider, locks as ephemeral sequential
// nodes in Apache Curator's layout, over one ZooKeeper session.
//
// docs/zookeeper.md describes the node layout, fencing, ACLs, interoperability with Curator
// and what "lost" means here.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <dlock/core/provider.hpp>

namespace dlock::zookeeper {

namespace detail {
class zookeeper_backend;
}

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
  /// A holder that loses contact for this long loses its locks.
  std::chrono::milliseconds session_timeout = std::chrono::seconds(15);
  /// How long the constructor waits for the first session before it throws.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(15);
  /// Digest authentication (zoo_add_auth "digest", "user:password"); empty user for none.
  std::string user;
  std::string password;
  /// The ACL of created nodes; creator_only and read_only_for_others need `user`.
  acl_policy acl = acl_policy::open;
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

/// The ZooKeeper provider: one session, shared by every lock it creates.
///
/// Mapping: the lock `name` is the node `<base_path>/<escaped name>` with
/// EPHEMERAL_SEQUENTIAL children `_c_<uuid>-lock-<sequence>` (Curator's InterProcessMutex);
/// the reader-writer lock uses `_c_<uuid>-__READ__<sequence>` / `__WRIT__` children of the
/// same node (Curator's InterProcessReadWriteLock), so a lock and the write side of the
/// reader-writer lock of one name exclude each other; the semaphore `name` uses
/// `<base_path>/<escaped name>/leases` and `/locks` (Curator's InterProcessSemaphoreV2).
/// Escaping keeps letters, digits, '-', '_' and '.' (not first); every other byte becomes %XX;
/// an escaped name over 200 bytes is cut and suffixed with '~' and its SHA-1.
///
/// Fencing token: the czxid of the grant's node (zxids rise ensemble-wide).
///
/// Thread safety: as dlock::provider.
///
///     auto zk = std::make_shared<dlock::zookeeper::provider>(
///         dlock::zookeeper::options{.hosts = "10.0.0.5:2181", .base_path = "/locks"});
///     dlock::lock_handle h = zk->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Opens the session and waits until it is connected.
  /// Throws std::invalid_argument for a bad option (naming it); dlock::connection_error when
  /// no member of the ensemble answers within connect_timeout.
  explicit provider(options opts);

  /// The node whose children are the lock (or reader-writer lock) `name`'s, without chroot.
  /// Throws std::invalid_argument for an invalid name.
  std::string lock_node_path(std::string_view name) const;

 private:
  provider(std::shared_ptr<detail::zookeeper_backend> backend, error_handler on_error);
  std::shared_ptr<detail::zookeeper_backend> backend_;
};

/// Registers the `zookeeper://` scheme with dlock::make_provider:
/// `zookeeper://[user:password@]h1:2181[,h2:2181...][/base/path]?session_timeout=15s` with
/// options session_timeout, connect_timeout, chroot=/app and acl=open|creator|read.
void register_scheme();

}  // namespace dlock::zookeeper
