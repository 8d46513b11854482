// dlock/postgres/provider.hpp: dlock::postgres::provider, locks as PostgreSQL advisory locks.
//
// A service that already has PostgreSQL needs nothing else: session-level advisory locks
// (pg_advisory_lock, _shared for readers), semaphores as max_count advisory keys with
// LISTEN/NOTIFY wake-ups, fencing tokens from a sequence. docs/postgres.md has the details;
// advisory_key.hpp the name-to-key mapping; transaction.hpp the transaction-scoped locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <dlock/core/provider.hpp>
#include <dlock/postgres/advisory_key.hpp>

namespace dlock::postgres {

namespace detail {
class postgres_backend;
}

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
  std::chrono::nanoseconds release_timeout = std::chrono::seconds(5);
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

/// The PostgreSQL provider.
///
/// Connections: a provider opens connections as it needs them. Locks obtained at once share
/// one connection (many held locks per session); a waiting acquire waits on a connection of
/// its own, which then keeps the lock. A session never acquires a name it already holds:
/// advisory locks are re-entrant per session, so that would let two local contenders in.
/// A held lock lives as long as its session: if the connection breaks (server restart,
/// pg_terminate_backend, network), every handle on it is marked lost.
///
/// Thread safety: as dlock::provider.
///
///     auto pg = std::make_shared<dlock::postgres::provider>(
///         dlock::postgres::options{.connection_string = "postgres://app@db/app"});
///     dlock::lock_handle h = pg->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Throws std::invalid_argument for a malformed connection string or a bad option (naming
  /// it). Connects lazily: an unreachable server is a connection_error of the first acquire.
  explicit provider(options opts);

  using dlock::provider::create_lock;
  using dlock::provider::create_reader_writer_lock;
  /// The lock on the explicit advisory key `key` (the same as create_lock(key.name())).
  distributed_lock create_lock(const advisory_key& key);
  /// The reader-writer lock on the explicit advisory key `key`.
  distributed_reader_writer_lock create_reader_writer_lock(const advisory_key& key);

 private:
  provider(std::shared_ptr<detail::postgres_backend> backend, error_handler on_error);
  std::shared_ptr<detail::postgres_backend> backend_;
};

/// Registers `postgres://` and `postgresql://` with dlock::make_provider. dlock's options
/// (connect_timeout, keepalive, fencing_sequence, semaphore_retry, locks_per_session,
/// release_timeout) are taken
/// from the query; the remaining parameters go to libpq when it knows them (sslmode,
/// application_name, ...), and anything else is std::invalid_argument.
void register_scheme();

}  // namespace dlock::postgres
