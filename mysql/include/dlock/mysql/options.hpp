// dlock/mysql/options.hpp: dlock::mysql::options, what a MariaDB / MySQL provider is built from
// (provider.hpp has the provider; the URL form of each field is in register_scheme()).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <dlock/core/durations.hpp>
#include <dlock/core/errors.hpp>

namespace dlock::mysql {

/// TLS settings, as MariaDB Connector/C names them (MYSQL_OPT_SSL_*).
struct tls_options {
  bool enabled = false;              ///< require TLS (MYSQL_OPT_SSL_ENFORCE)
  bool verify_server_cert = false;   ///< check the server's certificate and host name
  std::string ca;                    ///< CA file (ssl-ca)
  std::string cert;                  ///< client certificate (ssl-cert)
  std::string key;                   ///< client key (ssl-key)
};

/// Options of a MariaDB / MySQL provider; validated by the provider's constructor.
struct options {
  std::string host = "127.0.0.1";    ///< a host name, address, or a Unix socket path ('/...')
  std::uint16_t port = 3306;
  std::string user;
  std::string password;
  std::string database;              ///< where the fencing sequence lives; required with it
  tls_options tls;
  /// How long opening a connection may take before it is a connection_error. Positive.
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(5);
  /// How often every connection that holds locks or runs an attempt is checked with a round
  /// trip, which also asks the server whether our connection still holds each lock
  /// (IS_USED_LOCK). A connection whose round trip goes this long unanswered is given up,
  /// marking its handles lost (or failing its waits) within 1.5 periods of going silent (at
  /// once when the server closes it). Positive.
  std::chrono::nanoseconds keepalive = std::chrono::seconds(10);
  /// The server's side of the lease: every connection sets its session's wait_timeout to this
  /// (whole seconds, rounded up), so the server itself closes a connection whose client has
  /// sent nothing for this long, freeing its named locks. Zero: 2 × keepalive. At least
  /// 1.5 × keepalive (the client's lost bound), or a contender could be granted while the old
  /// holder still believes it holds.
  std::chrono::nanoseconds server_lease{};
  /// The SEQUENCE (MariaDB 10.3 or later) that fencing tokens come from, created in
  /// `database` on first use (CREATE SEQUENCE IF NOT EXISTS). Empty: no fencing tokens
  /// (every token is 0), for MySQL, which has no sequences.
  std::string fencing_sequence = "dlock_fencing";
  /// The table (`name` or `schema.name`, in `database` unless qualified) where every semaphore
  /// holder records the max_count it uses, so that an acquire with another max_count fails
  /// (named locks record no count). Created on first use when missing. Empty: not checked.
  std::string semaphore_table = "dlock_semaphore_slots";
  /// The table (`name` or `schema.name`) of leader elections' records (docs/election.md),
  /// created on first use when missing. Empty: the provider has no elections.
  std::string election_table = "dlock_elections";
  /// The table (`name` or `schema.name`, `dlock_grants` by convention) where every grant
  /// records its owner, fencing token and start, for provider::inspect() and list_locks(),
  /// created on first use when missing. Empty (the default): grants record nothing, inspect()
  /// shows the connections holding the name's locks, and list_locks() is unsupported. The row
  /// makes an uncontended lock cycle cost about half as much again (docs/mysql.md).
  std::string grant_table;
  /// A semaphore waiter (and a reader when every reader slot is taken) waits at one slot and
  /// tries the others this often: named locks cannot wait for "any of". Positive.
  std::chrono::nanoseconds semaphore_retry = std::chrono::milliseconds(250);
  /// How long release() (and a semaphore's current_count()) waits for the server before it
  /// throws connection_error. Positive.
  std::chrono::nanoseconds release_timeout = dlock::default_release_timeout;
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

}  // namespace dlock::mysql
