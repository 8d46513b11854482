// dlock/etcd/provider.hpp: dlock::etcd::provider, locks as keys ordered by create revision
// under one etcd lease, in the layout of etcd's own concurrency.Mutex.
//
// docs/etcd.md describes the key layout, fencing, TLS and authentication, interoperability
// with `etcdctl lock` and what "lost" means here.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <dlock/core/provider.hpp>
#include <dlock/etcd/options.hpp>

namespace dlock::etcd {

namespace detail {
class etcd_backend;
}

/// The etcd provider: one lease, kept alive in the background and revoked when the provider
/// goes, shared by every lock it creates.
///
/// Mapping: the lock `name` queues keys `<prefix><escaped name>/<lease id in hex>` attached to
/// the lease (etcd's concurrency.Mutex, so `etcdctl lock <prefix><name>` contends with it);
/// the reader-writer lock queues under `<prefix>.rw/<escaped name>/`, the semaphore under
/// `<prefix>.semaphore/<escaped name>/`: three distinct resources per name. Escaping keeps
/// letters, digits, '-', '_' and '.' (not first), every other byte becomes %XX; an escaped
/// name over 200 bytes is cut and suffixed with '~' and its SHA-1.
///
/// Fencing token: the create revision of the grant's key (revisions rise cluster-wide).
///
/// Thread safety: as dlock::provider.
///
///     auto locks = std::make_shared<dlock::etcd::provider>(
///         dlock::etcd::options{.endpoints = "10.0.0.5:2379", .prefix = "locks/"});
///     dlock::lock_handle h = locks->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Connects, authenticates if asked, and grants the provider's lease.
  /// Throws std::invalid_argument for a bad option (naming it); dlock::connection_error when
  /// no member grants the lease within connect_timeout, or authentication fails.
  explicit provider(options opts);
  /// Runs what the provider's thread still has queued for it (a release's stop of its key's
  /// watch), waiting up to release_timeout, so that when no lock or handle of it is left the
  /// lease is revoked before this returns.
  ~provider() override;

  /// The key prefix under which the lock `name` queues (`<prefix><escaped name>/`).
  /// Throws std::invalid_argument for an invalid name.
  std::string lock_key_prefix(std::string_view name) const;

 private:
  provider(std::shared_ptr<detail::etcd_backend> backend, error_handler on_error);
  std::shared_ptr<detail::etcd_backend> backend_;
};

/// Registers the `etcd://` scheme with dlock::make_provider:
/// `etcd://[user:password@]h1:2379[,h2:2379...][/prefix]?lease=10s` with options lease,
/// connect_timeout, release_timeout, tls=true|false, ca=<file>, cert=<file> and key=<file>.
/// The path (without its leading '/', with a '/' appended) is the key prefix.
void register_scheme();

}  // namespace dlock::etcd
