// dlock/postgres/options.hpp: dlock::postgres::options, what a PostgreSQL provider is built
// from (provider.hpp has the provider; the URL form of each field is in register_scheme()).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <dlock/core/durations.hpp>
#include <dlock/core/errors.hpp>

namespace dlock::postgres {

/// Options of a PostgreSQL provider; validated by the provider's constructor.
struct options {
  /// A libpq connection string: a URL `postgres://user:pw@host:port/db?sslmode=...` or
  /// `host=... dbname=...` key=value pairs. Required.
  std::string connection_string;
  /// How long opening a connection may take before it is a connection_error. Positive.
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(5);
  /// How often every connection that holds locks or runs an attempt is checked with a round
  /// trip. One whose round trip goes this long unanswered is given up, marking its handles lost
  /// (or failing its attempt) within 1.5 periods of going silent (at once when the server
  /// closes it); the traffic also keeps idle-connection killers away. Positive.
  std::chrono::nanoseconds keepalive = std::chrono::seconds(10);
  /// The server's side of the lease (PostgreSQL 14 or later): every session sets
  /// idle_session_timeout to this, so the server itself ends a session whose client has sent
  /// nothing for this long, and frees its locks, even when a middlebox keeps the TCP
  /// connection alive. The keepalive's round trips reset it. Zero: 2 × keepalive. At least
  /// 1.5 × keepalive (the client's lost bound), or a contender could be granted while the old
  /// holder still believes it holds; whole milliseconds.
  std::chrono::nanoseconds server_lease{};
  /// The server's tcp_user_timeout on every session: how long data the server sent (a grant)
  /// may stay unacknowledged before the server's kernel drops the connection. Zero: the
  /// server_lease. At least 1.5 × keepalive; whole milliseconds.
  std::chrono::nanoseconds server_tcp_user_timeout{};
  /// The server's TCP keepalives on every session (tcp_keepalives_idle, _interval, _count): a
  /// second line for a client whose machine is gone. Zero: keepalive (idle and interval, whole
  /// seconds, at least 1 s) and 3 probes. idle + interval × count must be at least
  /// 1.5 × keepalive.
  std::chrono::nanoseconds server_keepalives_idle{};
  std::chrono::nanoseconds server_keepalives_interval{};
  std::uint32_t server_keepalives_count = 0;
  /// The sequence that fencing tokens come from, created (CREATE SEQUENCE IF NOT EXISTS) on a
  /// connection's first use; `schema.name` allowed. Empty: no fencing tokens (every token is 0,
  /// which saves nothing on a round trip but the CREATE privilege).
  std::string fencing_sequence = "dlock_fencing";
  /// The table where each grant records its owner, token and start, for inspect() and
  /// list_locks() (one row per held lock, written in the grant's statement, deleted by its
  /// release), created (CREATE TABLE IF NOT EXISTS) on a connection's first use; `schema.name`
  /// allowed, `dlock_owners` by convention. Empty (the default): nothing recorded, inspect()
  /// shows the holding sessions' pids only and list_locks() is unsupported. The row makes an
  /// uncontended lock cycle cost about three times as much (docs/postgres.md).
  std::string owners_table;
  /// A semaphore waiter is woken by a NOTIFY from each release; a holder whose session ended
  /// without releasing sends none, so waiters also retry this often. Positive.
  std::chrono::nanoseconds semaphore_retry = std::chrono::seconds(1);
  /// How many held locks one session may carry (0: no limit). A broken session loses all of
  /// its locks together; 1 gives every held lock a session of its own (one connection per
  /// lock, so that a fault takes only that lock away), at the cost of a connection each.
  std::uint32_t locks_per_session = 0;
  /// How long release() (and a semaphore's current_count()) waits for the server before it
  /// throws connection_error. Positive.
  std::chrono::nanoseconds release_timeout = dlock::default_release_timeout;
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

}  // namespace dlock::postgres
