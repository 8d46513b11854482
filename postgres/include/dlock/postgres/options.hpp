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
  /// The sequence that fencing tokens come from, created (CREATE SEQUENCE IF NOT EXISTS) on a
  /// connection's first use; `schema.name` allowed. Empty: no fencing tokens (every token is 0,
  /// which saves nothing on a round trip but the CREATE privilege).
  std::string fencing_sequence = "dlock_fencing";
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
