// dlock/zookeeper/provider.hpp: dlock::zookeeper::provider, locks as ephemeral sequential
// nodes in Apache Curator's layout, over one ZooKeeper session.
//
// docs/zookeeper.md describes the node layout, fencing, ACLs, interoperability with Curator
// and what "lost" means here.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <dlock/core/provider.hpp>
#include <dlock/zookeeper/options.hpp>

namespace dlock::zookeeper {

namespace detail {
class zookeeper_backend;
}

/// The ZooKeeper provider: one session, shared by every lock it creates.
///
/// Mapping: the lock `name` is the node `<base_path>/<escaped name>` with
/// EPHEMERAL_SEQUENTIAL children `_c_<uuid>-lock-<sequence>` (Curator's InterProcessMutex);
/// the reader-writer lock uses `_c_<uuid>-__READ__<sequence>` / `__WRIT__` children of the
/// same node (Curator's InterProcessReadWriteLock), so a lock and the write side of the
/// reader-writer lock of one name exclude each other; the semaphore `name` uses
/// `<base_path>/<escaped name>/leases` and `/locks` (Curator's InterProcessSemaphoreV2).
/// The election `name` queues `_c_<uuid>-latch-<sequence>` children of the lock's node (Curator's
/// LeaderLatch, apart from the lock's queue); the lowest leads, its data is the leader's value.
/// Every other child's data is its grant's owner, for inspect().
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

  /// The node `handle`'s grant created (its path as this session sees it: below the chroot, if
  /// any), for a write that must fail once the grant is gone: a multi-op that checks this node
  /// (zoo_check_op, version -1) with the write (docs/fencing.md). nullopt when the handle is
  /// empty or not this backend's.
  static std::optional<std::string> granted_node(const lock_handle& handle);

 private:
  provider(std::shared_ptr<detail::zookeeper_backend> backend, error_handler on_error);
  std::shared_ptr<detail::zookeeper_backend> backend_;
};

/// Registers the `zookeeper://` scheme with dlock::make_provider:
/// `zookeeper://[user:password@]h1:2181[,h2:2181...][/base/path]?session_timeout=15s` with
/// options session_timeout, connect_timeout, release_timeout, chroot=/app and
/// acl=open|creator|read.
void register_scheme();

}  // namespace dlock::zookeeper
