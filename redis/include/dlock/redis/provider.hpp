// dlock/redis/provider.hpp: dlock::redis::provider, leased locks on one Redis server or on
// N independent servers (RedLock).
//
// A grant is a key with a random token and an expiry that one watchdog per provider extends
// while the handle lives; a fencing counter beside it issues the fencing token; waiters wake
// on a PUBLISH made by the release. docs/redis.md describes keys, scripts and faults;
// docs/redis-deployments.md TLS, Cluster, RedLock and Sentinel.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <dlock/core/provider.hpp>
#include <dlock/redis/options.hpp>

namespace dlock::redis {

namespace detail {
class redis_backend;
}

/// The Redis provider.
///
/// Mapping: the lock `name` is the key `<prefix>{<name>}` (with '%', '{' and '}' in the name
/// written %25, %7B, %7D, so the braces delimit the hash tag and no two names share a key);
/// its fencing counter is `<prefix>{<name>}:fence`, the reader-writer lock uses `...:rw:*`
/// keys and the semaphore `...:sem` keys under the same hash tag (docs/redis.md).
///
/// Thread safety: as dlock::provider.
///
///     auto locks = std::make_shared<dlock::redis::provider>(
///         dlock::redis::options{.servers = {{"10.0.0.5", 6379}}});
///     dlock::lock_handle h = locks->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Connects lazily, at the first acquire.
  /// Throws std::invalid_argument naming the option that is invalid.
  explicit provider(options opts);

  /// The key that holds the exclusive lock `name`. Throws std::invalid_argument for an
  /// invalid name.
  std::string lock_key(std::string_view name) const;

 private:
  explicit provider(std::shared_ptr<detail::redis_backend> backend, error_handler on_error);
  std::shared_ptr<detail::redis_backend> backend_;
};

/// Registers the Redis schemes with dlock::make_provider:
/// - `redis://[user:password@]host[:port][,host[:port]...][/db][?options]`, plain TCP;
/// - `rediss://...` the same over TLS, with the options tls_ca, tls_ca_dir, tls_cert, tls_key,
///   tls_server_name and tls_verify=full|ca|none (options::tls);
/// - `redis+unix:///path/to/redis.sock[?database=N&options]`, a Unix socket;
/// - `redis+cluster://[user:password@]host:port[,host:port...][?options]`, the seed nodes of a
///   Redis Cluster (options::cluster), and `rediss+cluster://` the same over TLS;
/// and for all of them expiry=30s, extend_every=10s, command_timeout=5s, release_timeout=5s,
/// prefix=dlock:, plain_keys=false, client_name=dlock. Several hosts mean RedLock.
void register_scheme();

}  // namespace dlock::redis
