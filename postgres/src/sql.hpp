// Private to dlock::postgres: the statements the backend sends on its sessions.
//
// They hold only integer keys and checked identifiers, never a lock name, so they go out as
// simple queries of plain text. An attempt's or a wait's first column names the slot it got
// ("0" for a lock) and its second is the fencing token, NULL when nothing was granted.
#pragma once

#include <cstdint>
#include <string>

#include <dlock/core/backend/backend.hpp>
#include <dlock/postgres/advisory_key.hpp>

namespace dlock::postgres::detail {

/// One attempt that does not wait: pg_try_advisory_lock[_shared] on `key`, or, for a
/// semaphore (`key` its base), the first free slot and the shared marker of its max_count,
/// unless another max_count's marker is held: then nothing, and the third column is that
/// other max_count. `token` is the fencing token's expression.
std::string attempt_sql(const acquire_request& request, const advisory_key& key,
                        const std::string& token);

/// A lock's blocking pg_advisory_lock[_shared] on `key`, ended by the server after
/// `lock_timeout_ms` (0: no limit); statement_timeout is off, so that a limit from the
/// connection string cannot end the wait early.
std::string wait_sql(const acquire_request& request, const advisory_key& key,
                     long long lock_timeout_ms, const std::string& token);

/// Gives back the grant of `slot` ("0" for a lock); a semaphore's also drops its marker and
/// notifies its waiters.
std::string unlock_sql(const acquire_request& request, const advisory_key& key,
                       const std::string& slot);

/// Unlocks `key` if this session holds it: for a grant that raced a timeout or a cancel.
std::string unlock_if_held_sql(const acquire_request& request, const advisory_key& key);

/// Where the grants' owners are recorded (docs/postgres.md, "What inspect can see"); an
/// empty table: nowhere.
struct owner_records {
  std::string table;
};

/// The table of owner rows, one per (advisory key, session pid).
std::string create_owners_table_sql(const std::string& table);

/// An attempt or a wait (`statement`, whose last statement is its SELECT) that also records
/// the grant it makes, from its result, in the same transaction. `statement` as it is for
/// the kinds that are not recorded (upgrade gates and elections, whose names are not the
/// caller's) or without a table.
std::string record_grant_sql(const std::string& statement, const acquire_request& request,
                             const advisory_key& key, const owner_records& records);

/// Sent before a lock's blocking wait, on its own: the waiter's row, without a token.
std::string record_waiting_sql(const acquire_request& request, const advisory_key& key,
                               const owner_records& records);

/// Appended to an unlock: drops this session's row of the key (`slot` for a semaphore).
std::string forget_grant_sql(const acquire_request& request, const advisory_key& key,
                             const std::string& slot, const owner_records& records);

/// The pg_locks condition (classid, objid, objsubid) of the advisory key `key`.
std::string pg_locks_match(const advisory_key& key);

/// The session's own pg_stat_activity.backend_start, as text: the guard of a cancel by pid
/// (cancel_request.hpp).
std::string own_backend_start_sql();

std::string listen_sql(const std::string& channel);
std::string unlisten_sql(const std::string& channel);

/// A semaphore's held slots, then the max_count that another holder uses (NULL: none).
std::string count_slots_sql(const std::string& name, std::uint32_t max_count);

}  // namespace dlock::postgres::detail
