// Private to dlock::mysql: every SQL statement the backend sends.
//
// Names are those of lock_name.hpp (letters, digits and ":-_." only), so they go into quoted
// strings as they are. Every attempt's batch ends in one row: (slot, token[, gate_free]);
// token NULL means not granted.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/backend/backend.hpp>
#include <dlock/mysql/options.hpp>

namespace dlock::mysql::detail {

/// What the statements of one provider name besides the locks: its fencing token, where
/// semaphore holders record their max_count and where elections keep their leader records.
struct statement_settings {
  std::string token;            ///< NEXTVAL(`sequence`), or 0 without fencing
  std::string semaphore_table;  ///< empty: max_count is not checked
  std::string election_table;   ///< empty: no elections
  std::string grant_table;      ///< empty: grants record no owner, and nothing inspects
};
statement_settings statement_settings_of(const options& opts);

/// Throws std::invalid_argument naming options.`field` unless `object` is empty, `name` or
/// `schema.name` of letters, digits, '_' and '$'.
void validate_object_name(const char* field, const std::string& object);

/// What every new connection runs first: the server lease (its session's wait_timeout).
std::string server_lease_sql(std::chrono::nanoseconds server_lease);
/// Creates the fencing sequence, the semaphore table and the election table, those of them
/// that are named and missing (no DDL at all when they exist). Empty when none is named.
std::string create_objects_sql(const options& opts);

/// The election board's statements (docs/election.md). proclaim_sql's last row is 1 when the
/// record of `term` holds `value` and its holder still holds the election's lock.
std::string proclaim_sql(const std::string& table, std::string_view election, std::uint64_t term,
                         std::string_view value);
std::string withdraw_sql(const std::string& table, std::string_view election,
                         std::uint64_t term);
/// One row (term, HEX(value)) when a live holder has proclaimed; none otherwise.
std::string leader_sql(const std::string& table, std::string_view election);

/// The bytes of HEX() `digits` (upper case, as the server writes them).
std::string from_hex(const std::string& digits);

/// One row (slots of semaphore `request` held now, the max_count of a live holder that uses
/// another one or NULL); the second column is always NULL without a semaphore table.
std::string count_slots_sql(const acquire_request& request, const std::string& semaphore_table);

/// The inspector's statements (docs/mysql.md, "What inspect can see"). inspect_sql deletes
/// the name's rows whose holder no longer holds their lock, then gives the rest: (kind,
/// token, since_us, HEX(owner), holder), oldest first.
std::string inspect_sql(const std::string& grant_table, const std::string& name);
/// HEX(name) of every name under `prefix` with a live grant row.
std::string list_sql(const std::string& grant_table, std::string_view prefix);
/// (TIME_MS, INFO) of every connection waiting in GET_LOCK for a lock of `name`, longest first.
std::string waiters_sql(const std::string& name);
/// (what, connection id) of every named lock of `name` held now, what being L (the lock), W
/// (a reader-writer lock's writer gate), R (one of its reader slots) or S (a semaphore slot).
std::string held_locks_sql(const std::string& name);
/// The connection id of every holder of any named lock of `name` (not its election).
std::string holders_sql(const std::string& name);

/// One attempt of `request`. `wait`: how long the server may block in GET_LOCK (zero: one
/// try). A semaphore waits at slot `slot` only (its other slots are tried by a later
/// attempt); a reader that waits passes the writer gate first. A semaphore's row has a third
/// column: the max_count of live holders that use another one (then nothing is granted).
std::string attempt_sql(const acquire_request& request, const statement_settings& settings,
                        std::chrono::nanoseconds wait, std::uint32_t slot = 0);

/// Gives the grant back: the slot's lock, or every lock of the name (writer, cleanup), and a
/// semaphore slot's row in the semaphore table.
std::string release_sql(const acquire_request& request, const statement_settings& settings,
                        std::optional<std::uint32_t> slot);

/// The named lock the keepalive checks for a grant of `request` at `slot`.
std::string checked_name(const acquire_request& request, std::uint32_t slot);

/// Every server name `request` may hold (for footprints and cleanup).
std::vector<std::string> names_of(const acquire_request& request);

/// CONNECTION_ID() and IS_USED_LOCK() of each of `names`, in one row.
std::string probe_sql(const std::vector<std::string>& names);

/// Ends the statement running on connection `thread_id`.
std::string kill_query_sql(std::uint64_t thread_id);

/// How long GET_LOCK may wait for "until cancelled": a year.
inline constexpr std::chrono::seconds wait_forever{31536000};

}  // namespace dlock::mysql::detail
