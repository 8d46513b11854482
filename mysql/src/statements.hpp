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
#include <vector>

#include <dlock/core/backend/backend.hpp>

namespace dlock::mysql::detail {

/// The fencing token's SQL: NEXTVAL(`sequence`), or 0 without fencing.
std::string token_expression(const std::string& fencing_sequence);
/// Throws std::invalid_argument unless `sequence` is empty, `name` or `schema.name` of
/// letters, digits, '_' and '$'.
void validate_fencing_sequence(const std::string& sequence);

/// What every new connection runs first: the server lease (its session's wait_timeout).
std::string server_lease_sql(std::chrono::nanoseconds server_lease);
/// Creates the fencing sequence unless it exists (no DDL at all when it does).
std::string create_sequence_sql(const std::string& fencing_sequence);

/// One attempt of `request`. `wait`: how long the server may block in GET_LOCK (zero: one
/// try). A semaphore waits at slot `slot` only (its other slots are tried by a later
/// attempt); a reader that waits passes the writer gate first.
std::string attempt_sql(const acquire_request& request, const std::string& token,
                        std::chrono::nanoseconds wait, std::uint32_t slot = 0);

/// Gives the grant back: the slot's lock, or every lock of the name (writer, cleanup).
std::string release_sql(const acquire_request& request, std::optional<std::uint32_t> slot);

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
