// dlock/mysql/provider.hpp: dlock::mysql::provider, locks as MariaDB / MySQL named locks.
//
// A service that already has MariaDB or MySQL needs nothing else: GET_LOCK / RELEASE_LOCK on
// names mapped as lock_name.hpp says, semaphores and reader-writer locks built from several
// named locks, fencing tokens from a sequence. docs/mysql.md has the details; options.hpp the
// settings.
#pragma once

#include <memory>

#include <dlock/core/provider.hpp>
#include <dlock/mysql/lock_name.hpp>
#include <dlock/mysql/options.hpp>

namespace dlock::mysql {

namespace detail {
class mysql_backend;
}

/// The MariaDB / MySQL provider.
///
/// Connections: a provider opens connections as it needs them. Locks obtained at once share
/// one connection; a waiting acquire waits in GET_LOCK on a connection of its own, which then
/// keeps the lock. A connection never asks for a name it already holds (named locks are
/// re-entrant per connection, so that would let two local contenders in). A held lock lives
/// as long as its connection: if the connection breaks (server restart, KILL, network), every
/// handle on it is marked lost. The server closes a connection whose client has gone silent by
/// itself (options::server_lease), freeing its locks.
///
/// Thread safety: as dlock::provider.
///
///     auto db = std::make_shared<dlock::mysql::provider>(
///         dlock::mysql::options{.host = "db", .user = "app", .database = "app"});
///     dlock::lock_handle h = db->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Throws std::invalid_argument for a bad option (naming it). Connects lazily: an
  /// unreachable server is a connection_error of the first acquire.
  explicit provider(options opts);

 private:
  provider(std::shared_ptr<detail::mysql_backend> backend, error_handler on_error);
  std::shared_ptr<detail::mysql_backend> backend_;
};

/// Registers `mysql://` and `mariadb://` with dlock::make_provider:
/// `mysql://user:pw@host:3306/db?keepalive=10s`. Options: connect_timeout, keepalive,
/// server_lease, semaphore_retry, release_timeout (durations), fencing_sequence, and TLS:
/// ssl (true: require TLS), ssl-ca, ssl-cert, ssl-key, ssl-verify-server-cert (true/false),
/// ssl-mode (DISABLED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY, as MySQL's clients spell it);
/// '_' may stand for '-'. Anything else is std::invalid_argument.
void register_scheme();

}  // namespace dlock::mysql
