// dlock/redis/provider.hpp: dlock::redis::provider, leased locks on one Redis server or on
// N independent servers (RedLock).
//
// A grant is a key with a random token and an expiry that one watchdog per provider extends
// while the handle lives; a fencing counter beside it issues the fencing token; waiters wake
// on a PUBLISH made by the release. docs/redis.md describes keys, scripts, RedLock and faults.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/provider.hpp>

namespace dlock::redis {

namespace detail {
class redis_backend;
}

/// One server's address.
struct server {
  std::string host;
  std::uint16_t port = 6379;
};

/// Options of a Redis provider; validated by the provider's constructor.
struct options {
  /// One server, or N >= 2 independent servers for RedLock (an odd N, 3 or 5, is the useful
  /// choice: a grant needs a majority). Required.
  std::vector<server> servers;
  /// ACL user (empty: the default user) and password, used on every server. The password
  /// never appears in a message.
  std::string user;
  std::optional<std::string> password;
  /// Logical database (SELECT) on every server.
  int database = 0;
  /// A grant's lease. A holder that dies frees its lock within this time. Must be >= 10 ms.
  std::chrono::nanoseconds expiry = std::chrono::seconds(30);
  /// How often the watchdog extends every held lease; zero means expiry / 3. Must be below
  /// the expiry.
  std::chrono::nanoseconds extend_every{};
  /// How long a command may wait for its reply before the connection counts as lost; zero
  /// means expiry / 3, at most 5 s. With RedLock it is the per-node timeout.
  std::chrono::nanoseconds command_timeout{};
  /// Prepended to every key and channel.
  std::string key_prefix = "dlock:";
  /// Plain-key mode: the exclusive lock `name` is the plain key `<key_prefix><name>` holding
  /// a random value with an expiry, the key that `SET key value NX PX ms` makes, so dlock and
  /// other clients that lock this way exclude each other. Reader-writer locks and semaphores
  /// are unaffected.
  bool plain_keys = false;
  /// The connections' name in CLIENT LIST (CLIENT SETNAME), to find or end them there.
  std::string client_name = "dlock";
  /// Receives errors of background work (the watchdog) and of releases in destructors.
  error_handler on_error;
};

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

/// Registers the `redis://` scheme with dlock::make_provider:
/// `redis://[user:password@]host[:port][,host[:port]...][/db][?options]` with options
/// expiry=30s, extend_every=10s, command_timeout=5s, prefix=dlock:, plain_keys=false,
/// client_name=dlock.
/// Several hosts mean RedLock.
void register_scheme();

}  // namespace dlock::redis
