#include "sql.hpp"

#include "election_key.hpp"
#include "semaphore_keys.hpp"

namespace dlock::postgres::detail {

namespace {

std::string mode_suffix(const acquire_request& request) {
  const bool shared =
      request.kind == resource_kind::reader_writer_lock && request.mode == lock_mode::shared;
  return shared ? "_shared" : "";
}

// The slots of a semaphore: `count` consecutive bigint keys from `base`.
std::string slot_array(const advisory_key& base, std::uint32_t count) {
  std::string array = "ARRAY[";
  const auto first = static_cast<std::uint64_t>(base.key());
  for (std::uint32_t i = 0; i < count; ++i) {
    if (i) array += ',';
    array += std::to_string(static_cast<std::int64_t>(first + i));
  }
  return array + "]::bigint[]";
}

// A scalar subquery: the max_count of another marker of the semaphore `name` held by anyone
// (objid = max_count * 256 + 1), NULL when there is none.
std::string other_max_count_sql(const std::string& name, std::uint32_t max_count) {
  const auto marker = max_count_marker(name, max_count);
  return "(SELECT objid::bigint >> 8 FROM pg_locks WHERE locktype = 'advisory' "
         "AND granted AND objsubid = 2 AND classid::bigint = " +
         std::to_string(static_cast<std::uint32_t>(marker.high())) +
         " AND objid::bigint & 255 = 1 AND objid::bigint <> " +
         std::to_string(static_cast<std::uint32_t>(marker.low())) + " LIMIT 1)";
}

// A semaphore's attempt. Its own marker comes first, and only then the look for another one:
// of two attempts with different counts at the same moment, at least one sees the other's
// marker (both may), so two counts are never granted side by side. An attempt that finds
// another count takes no slot; one that gets no slot gives its marker back. The third column
// is the other count. OFFSET 0 keeps the look a single evaluation, before any slot is tried.
std::string semaphore_attempt_sql(const acquire_request& request, const advisory_key& base,
                                  const std::string& token) {
  const std::string marker = max_count_marker(request.name, request.max_count).sql_arguments();
  // LIMIT 1 stops the scan at the first slot obtained, so at most one is taken.
  return "SELECT pg_advisory_lock_shared(" + marker + "); SELECT granted.slot, CASE WHEN "
         "granted.slot IS NOT NULL THEN " + token + " END, checked.other, CASE WHEN granted.slot "
         "IS NULL THEN pg_advisory_unlock_shared(" + marker + ") END FROM (SELECT " +
         other_max_count_sql(request.name, request.max_count) +
         " AS other OFFSET 0) AS checked LEFT JOIN LATERAL (SELECT slot FROM unnest(" +
         slot_array(base, request.max_count) +
         ") AS slot WHERE CASE WHEN checked.other IS NULL THEN pg_try_advisory_lock(slot) "
         "ELSE false END LIMIT 1) AS granted ON true";
}

}  // namespace

// A bigint is classid (high 32), objid (low 32), objsubid 1; a pair is classid (first),
// objid (second), objsubid 2.
std::string pg_locks_match(const advisory_key& key) {
  const auto bits = static_cast<std::uint64_t>(key.key());
  return "classid::bigint = " + std::to_string(bits >> 32) +
         " AND objid::bigint = " + std::to_string(bits & 0xffffffffu) +
         " AND objsubid = " + (key.is_pair() ? "2" : "1");
}

std::string attempt_sql(const acquire_request& request, const advisory_key& key,
                        const std::string& token) {
  if (request.kind == resource_kind::semaphore) return semaphore_attempt_sql(request, key, token);
  return "SELECT 0, CASE WHEN pg_try_advisory_lock" + mode_suffix(request) + "(" +
         key.sql_arguments() + ") THEN " + token + " END";
}

std::string wait_sql(const acquire_request& request, const advisory_key& key,
                     long long lock_timeout_ms, const std::string& token) {
  return "SET lock_timeout = " + std::to_string(lock_timeout_ms) +
         "; SET statement_timeout = 0; SELECT 0, " + token +
         " FROM (SELECT pg_advisory_lock" + mode_suffix(request) + "(" + key.sql_arguments() +
         ") OFFSET 0) AS granted";
}

std::string unlock_sql(const acquire_request& request, const advisory_key& key,
                       const std::string& slot) {
  if (request.kind == resource_kind::semaphore) {
    return "SELECT pg_advisory_unlock((" + slot + ")::bigint), pg_advisory_unlock_shared(" +
           max_count_marker(request.name, request.max_count).sql_arguments() +
           "), pg_notify('" + channel_of(request.name) + "', '')";
  }
  if (request.kind == resource_kind::election) {
    // Observers listen (election_board.cpp): a leader that lets go says so.
    return "SELECT pg_advisory_unlock(" + key.sql_arguments() + "), pg_notify('" +
           leader_channel(request.name) + "', '')";
  }
  return "SELECT pg_advisory_unlock" + mode_suffix(request) + "(" + key.sql_arguments() + ")";
}

std::string unlock_if_held_sql(const acquire_request& request, const advisory_key& key) {
  return "SELECT pg_advisory_unlock" + mode_suffix(request) + "(" + key.sql_arguments() +
         ") FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = "
         "pg_backend_pid() AND " +
         pg_locks_match(key);
}

namespace {

bool recorded(const acquire_request& request, const owner_records& records) {
  return !records.table.empty() && request.kind != resource_kind::upgrade_gate &&
         request.kind != resource_kind::election;
}

std::string kind_word(const acquire_request& request) {
  switch (request.kind) {
    case resource_kind::semaphore: return "semaphore slot";
    case resource_kind::reader_writer_lock:
      return request.mode == lock_mode::shared ? "read" : "write";
    default: return "exclusive";
  }
}

// Names and owners go out hex-encoded: any bytes, and nothing to escape.
std::string bytes_literal(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return "decode('" + hex + "', 'hex')";
}

// The columns (classid, objid, objsubid) of a key, as pg_locks shows it.
std::string key_columns(const advisory_key& key) {
  const auto bits = static_cast<std::uint64_t>(key.key());
  return std::to_string(bits >> 32) + ", " + std::to_string(bits & 0xffffffffu) + ", " +
         (key.is_pair() ? "2" : "1");
}

const char* const upsert_owner =
    " ON CONFLICT (classid, objid, objsubid, pid) DO UPDATE SET name = excluded.name, kind = "
    "excluded.kind, token = excluded.token, since = excluded.since, owner = excluded.owner";

}  // namespace

std::string create_owners_table_sql(const std::string& table) {
  // Unlogged: no WAL to flush at each grant's commit, and emptied by a crash, which ends every
  // session and so every grant its rows stood for.
  return "CREATE UNLOGGED TABLE IF NOT EXISTS " + table +
         " (classid bigint NOT NULL, objid bigint NOT NULL, objsubid integer NOT NULL, pid "
         "integer NOT NULL, name bytea NOT NULL, kind text NOT NULL, token bigint, since "
         "timestamptz NOT NULL, owner bytea NOT NULL, PRIMARY KEY (classid, objid, objsubid, "
         "pid))";
}

// The statement's last SELECT (its first column the slot, its second the token, NULL when
// nothing was granted) becomes a CTE that the row's INSERT reads: the grant is recorded from its
// own result, in its own transaction, with no scan of pg_locks.
std::string record_grant_sql(const std::string& statement, const acquire_request& request,
                             const advisory_key& key, const owner_records& records) {
  if (!recorded(request, records)) return statement;
  const auto last = statement.rfind("; ");
  const std::string before = last == std::string::npos ? "" : statement.substr(0, last + 2);
  const std::string select = last == std::string::npos ? statement : statement.substr(last + 2);
  const bool semaphore = request.kind == resource_kind::semaphore;
  // pg_locks shows a bigint key's halves as unsigned (oid) columns.
  const std::string key_of_grant =
      semaphore ? "(attempt.slot >> 32) & 4294967295, attempt.slot & 4294967295, 1"
                : key_columns(key);
  return before + "WITH attempt(slot, token" + (semaphore ? ", other, unmarked" : "") + ") AS (" +
         select + "), recorded AS (INSERT INTO " + records.table +
         " (classid, objid, objsubid, pid, name, kind, token, since, owner) SELECT " +
         key_of_grant + ", pg_backend_pid(), " + bytes_literal(request.name) + ", '" +
         kind_word(request) + "', attempt.token, clock_timestamp(), " +
         bytes_literal(request.owner) + " FROM attempt WHERE attempt.token IS NOT NULL" +
         upsert_owner + ") SELECT * FROM attempt";
}

std::string record_waiting_sql(const acquire_request& request, const advisory_key& key,
                               const owner_records& records) {
  if (!recorded(request, records)) return {};
  return "INSERT INTO " + records.table +
         " (classid, objid, objsubid, pid, name, kind, token, since, owner) VALUES (" +
         key_columns(key) + ", pg_backend_pid(), " + bytes_literal(request.name) + ", '" +
         kind_word(request) + "', NULL, clock_timestamp(), " + bytes_literal(request.owner) +
         ")" + upsert_owner;
}

std::string forget_grant_sql(const acquire_request& request, const advisory_key& key,
                             const std::string& slot, const owner_records& records) {
  if (!recorded(request, records)) return {};
  const std::string of_key =
      request.kind == resource_kind::semaphore
          ? "classid = (((" + slot + ")::bigint >> 32) & 4294967295) AND objid = ((" + slot +
                ")::bigint & 4294967295) AND objsubid = 1"
          : pg_locks_match(key);
  return "DELETE FROM " + records.table + " WHERE pid = pg_backend_pid() AND " + of_key;
}

std::string own_backend_start_sql() {
  return "SELECT backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()";
}

std::string listen_sql(const std::string& channel) { return "LISTEN \"" + channel + "\""; }

std::string unlisten_sql(const std::string& channel) { return "UNLISTEN \"" + channel + "\""; }

// A bigint key is classid (high 32 bits) and objid (low 32 bits).
std::string count_slots_sql(const std::string& name, std::uint32_t max_count) {
  return "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
         "objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = ANY(" +
         slot_array(semaphore_base(name), max_count) + ")), " +
         other_max_count_sql(name, max_count);
}

}  // namespace dlock::postgres::detail
