// dlock/postgres/provider.hpp: dlock::postgres::provider, locks as PostgreSQL advisory locks.
//
// A service that already has PostgreSQL needs nothing else: session-level advisory locks
// (pg_advisory_lock, _shared for readers), semaphores as max_count advisory keys with
// LISTEN/NOTIFY wake-ups, fencing tokens from a sequence. docs/postgres.md has the details;
// options.hpp the settings; advisory_key.hpp the name-to-key mapping; transaction.hpp the
// transaction-scoped locks.
#pragma once

#include <memory>

#include <dlock/core/provider.hpp>
#include <dlock/postgres/advisory_key.hpp>
#include <dlock/postgres/options.hpp>

namespace dlock::postgres {

namespace detail {
class postgres_backend;
}

/// The PostgreSQL provider.
///
/// Connections: a provider opens connections as it needs them. Locks obtained at once share
/// one connection (many held locks per session); a waiting acquire waits on a connection of
/// its own, which then keeps the lock. A session never acquires a name it already holds:
/// advisory locks are re-entrant per session, so that would let two local contenders in.
/// A held lock lives as long as its session: if the connection breaks (server restart,
/// pg_terminate_backend, network), every handle on it is marked lost. The server ends a
/// session whose client has gone silent by itself (options::server_lease), freeing its locks.
///
/// Thread safety: as dlock::provider.
///
///     auto pg = std::make_shared<dlock::postgres::provider>(
///         dlock::postgres::options{.connection_string = "postgres://app@db/app"});
///     dlock::lock_handle h = pg->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Throws std::invalid_argument for a malformed connection string, a parameter value libpq
  /// would reject (sslmode=bogus) or a bad option (naming it). Connects lazily: an
  /// unreachable server is a connection_error of the first acquire.
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
/// (connect_timeout, keepalive, server_lease, server_tcp_user_timeout,
/// server_keepalives_idle/_interval/_count, fencing_sequence, semaphore_retry,
/// locks_per_session, release_timeout) are taken from the query; the remaining parameters go
/// to libpq when it knows them (sslmode, application_name, ...), and anything else is
/// std::invalid_argument.
void register_scheme();

}  // namespace dlock::postgres
