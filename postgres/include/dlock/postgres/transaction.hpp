// dlock/postgres/transaction.hpp: advisory locks held by the caller's own libpqxx transaction.
//
// pg_advisory_xact_lock ties a lock to a transaction: commit or rollback releases it, so a
// lock that guards rows the transaction writes can never outlive the write. No handle, no
// provider: the caller's transaction is the lease. Requires linking libpqxx 6.4 (the caller
// has it already: it passes a pqxx transaction). Not for pqxx::nontransaction, whose
// statements each commit at once.
#pragma once

#include <chrono>
#include <string_view>

#include <dlock/core/lock_kind.hpp>
#include <dlock/postgres/advisory_key.hpp>

namespace pqxx {
class dbtransaction;
}

namespace dlock::postgres {

/// Takes the advisory lock `key` (see advisory_key::from_name for names) for the rest of
/// `transaction`: pg_advisory_xact_lock, or pg_advisory_xact_lock_shared for
/// lock_mode::shared. A zero timeout makes one attempt (pg_try_advisory_xact_lock); otherwise
/// the server waits with lock_timeout set to `timeout` (max(): no limit) and statement_timeout
/// off, and both are set back to the transaction's own values afterwards, whatever happens.
/// A failed wait is rolled back to a savepoint, so the transaction stays usable.
/// Returns: true when held; false when not obtained in time.
/// Throws: dlock::deadlock_error when the server broke a deadlock by failing this wait
/// (SQLSTATE 40P01); dlock::connection_error when the connection broke; dlock::error for any
/// other server error; std::invalid_argument for a negative timeout.
/// Blocks up to `timeout` (plus a round trip). Thread safety: as the transaction's.
bool try_lock_in_transaction(pqxx::dbtransaction& transaction, const advisory_key& key,
                             std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero(),
                             lock_mode mode = lock_mode::exclusive);

/// As try_lock_in_transaction with the name's key, but a lock not obtained in time is
/// dlock::timeout_error. Default timeout: none.
void lock_in_transaction(pqxx::dbtransaction& transaction, std::string_view name,
                         std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max(),
                         lock_mode mode = lock_mode::exclusive);

}  // namespace dlock::postgres
