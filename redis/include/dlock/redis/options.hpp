// dlock/redis/options.hpp: dlock::redis::options, what a Redis provider is told: its servers
// (one, or N for RedLock) and how to reach them (TCP, TLS, a Unix socket), log-in, lease
// timing, key layout and error hook.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <dlock/core/errors.hpp>
#include <dlock/core/durations.hpp>

namespace dlock::redis {

/// One server's address: a host and port, or the path of a Unix socket.
struct server {
  std::string host;
  std::uint16_t port = 6379;
  /// The server's Unix socket (e.g. "/run/redis/redis-server.sock"); when set, `host` must be
  /// empty and the port is unused.
  std::string unix_socket;
};

/// What a TLS client checks of the server's certificate.
enum class tls_verify {
  full,  ///< the chain up to a trusted CA, and the host name (or IP address) it was given for
  ca,    ///< the chain only: any certificate the CA signed is accepted, whatever its name
  none,  ///< nothing: encryption without authentication (a man in the middle goes unnoticed)
};

/// TLS to every server (Redis's `tls-port`). Files are PEM; they are read when the provider
/// connects, and a file that cannot be read, like a certificate that fails verification, is a
/// connection_error naming the server and OpenSSL's reason.
struct tls_options {
  /// Speak TLS (a `rediss://` URL). Not with Unix sockets.
  bool enabled = false;
  /// The CA certificates that may sign the server's certificate, in one file, or in a
  /// directory prepared with `openssl rehash`. Neither: the system's trusted CAs.
  std::string ca_file;
  std::string ca_dir;
  /// The client's certificate (chain) and private key, for servers that ask for one (mutual
  /// TLS, Redis's `tls-auth-clients`). Both or neither.
  std::string cert_file;
  std::string key_file;
  /// The name sent in SNI and checked against the certificate; empty: the server's host.
  std::string server_name;
  tls_verify verify = tls_verify::full;
};

/// Redis Sentinel: the provider finds the master that the sentinels monitor under
/// `master_name`, checks it with ROLE, and follows it through failovers
/// (docs/redis-deployments.md, "Sentinel"). Set `master_name` and `sentinels` and leave
/// options::servers empty.
struct sentinel_options {
  /// The name the sentinels monitor the master under (`sentinel monitor <name> ...`); empty:
  /// no Sentinel.
  std::string master_name;
  /// The sentinels to ask, in order (port 26379 by default in URLs). At least one.
  std::vector<server> sentinels;
  /// ACL user and password of the sentinels (`requirepass` / `user` in sentinel.conf), which
  /// may differ from the data nodes' (options::user, options::password). Never in a message.
  std::string user;
  std::optional<std::string> password;
  /// Each grant waits until this many replicas acknowledged it (Redis's WAIT) before the
  /// acquire returns; fewer within `wait_timeout` is a connection_error and the grant is
  /// given back. Zero: no waiting (a failover may lose a grant made just before it).
  int wait_replicas = 0;
  /// How long a grant waits for the replicas; zero means command_timeout / 2. Must be below
  /// command_timeout (the WAIT holds the command connection while it waits).
  std::chrono::nanoseconds wait_timeout{};
};

/// How a provider lays out a name's keys on the servers.
enum class key_layout {
  /// dlock's own: every key of a name inside its hash tag (`<key_prefix>{<name>}:...`), with
  /// owner records, the waiters' queue and fencing counters (docs/redis.md, "Keys").
  dlock,
  /// The .NET DistributedLock library's (DistributedLock.Redis 1.x): a lock is the string key
  /// `<key_prefix><name>`, a reader-writer lock the set `<key_prefix><name>.readers` and the
  /// string `<key_prefix><name>.writer`, a semaphore the sorted set `<key_prefix><name>`, each
  /// read and written by .NET's rules, so that dlock and .NET services exclude each other.
  /// Fencing tokens still rise (a counter of dlock's beside .NET's keys); what this layout
  /// cannot give (owners, queues, inspect) is listed in docs/dotnet.md.
  dotnet,
};

/// Options of a Redis provider; validated by the provider's constructor, which throws
/// std::invalid_argument naming the field that is invalid.
///
/// Timing: a grant lives `expiry` unless the watchdog extends it (every `extend_every`);
/// every command waits at most `command_timeout` for its reply (per node with RedLock); a
/// caller waiting for the provider's network thread (release() with RedLock, a semaphore's
/// current_count()) waits at most `release_timeout`. A RedLock step settles once a quorum of
/// nodes decided it, so one silent node makes no acquire or release wait for its timeout.
struct options {
  /// One server, or N >= 2 independent servers for RedLock (an odd N, 3 or 5, is the useful
  /// choice: a grant needs a majority). Required.
  std::vector<server> servers;
  /// The servers are seed nodes of one Redis Cluster (a `redis+cluster://` URL), not RedLock's
  /// independent servers: the slot map is asked of them, and each name lives on the master of
  /// its hash slot (docs/redis-deployments.md, "Cluster"). Not with Unix sockets, a database
  /// other than 0, or plain_keys.
  bool cluster = false;
  /// TLS to every server; off by default.
  tls_options tls;
  /// The master of a Sentinel deployment, in place of `servers`; off by default.
  sentinel_options sentinel;
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
  /// How long a call that waits for the network thread (release() with RedLock, a semaphore's
  /// current_count()) waits for its answer before it throws connection_error; a lease not
  /// deleted then runs out on the servers within `expiry`. Positive. (On one server, release()
  /// runs on the caller's thread and is bounded by command_timeout.)
  std::chrono::nanoseconds release_timeout = dlock::default_release_timeout;
  /// Prepended to every key and channel.
  std::string key_prefix = "dlock:";
  /// Plain-key mode: the exclusive lock `name` is the plain key `<key_prefix><name>` holding
  /// a random value with an expiry, the key that `SET key value NX PX ms` makes, so dlock and
  /// other clients that lock this way exclude each other. It covers only the exclusive lock:
  /// acquiring a reader-writer lock or a semaphore (or counting its slots) through a provider
  /// in this mode throws std::invalid_argument, since neither could exclude such clients; use
  /// a second provider without it for those.
  bool plain_keys = false;
  /// Which keys a name's locks live in (a `layout=dlock|dotnet` URL option). Set key_prefix
  /// to what the .NET side's names start with (usually ""): the keys are the prefix and the
  /// name as is. Not with plain_keys (the dotnet layout's locks are plain keys already). On a
  /// Cluster, a name must carry a hash tag (`{order-42}:export`) so that its keys share a slot.
  key_layout layout = key_layout::dlock;
  /// The connections' name in CLIENT LIST (CLIENT SETNAME), to find or end them there.
  std::string client_name = "dlock";
  /// Receives errors of background work (the watchdog) and of releases in destructors.
  error_handler on_error;
};

}  // namespace dlock::redis
