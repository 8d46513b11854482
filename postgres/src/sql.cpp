#include "sql.hpp"

#include "semaphore_keys.hpp"

namespace dlock::postgres::detail {

namespace {

std::string mode_suffix(const acquire_request& request) {
  const bool shared =
      request.kind == primitive::reader_writer_lock && request.mode == lock_mode::shared;
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

// pg_locks columns of a key: a bigint is classid (high 32), objid (low 32), objsubid 1; a pair
// is classid (first), objid (second), objsubid 2.
std::string pg_locks_match(const advisory_key& key) {
  const auto bits = static_cast<std::uint64_t>(key.key());
  return "classid::bigint = " + std::to_string(bits >> 32) +
         " AND objid::bigint = " + std::to_string(bits & 0xffffffffu) +
         " AND objsubid = " + (key.is_pair() ? "2" : "1");
}

}  // namespace

std::string attempt_sql(const acquire_request& request, const advisory_key& key,
                        const std::string& token) {
  if (request.kind == primitive::semaphore) {
    // LIMIT 1 stops the scan at the first slot obtained, so at most one is taken.
    return "SELECT slot, " + token + ", pg_advisory_lock_shared(" +
           max_count_marker(request.name, request.max_count).sql_arguments() +
           ") FROM (SELECT slot FROM unnest(" + slot_array(key, request.max_count) +
           ") AS slot WHERE pg_try_advisory_lock(slot) LIMIT 1) AS granted";
  }
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
  if (request.kind == primitive::semaphore) {
    return "SELECT pg_advisory_unlock((" + slot + ")::bigint), pg_advisory_unlock_shared(" +
           max_count_marker(request.name, request.max_count).sql_arguments() +
           "), pg_notify('" + channel_of(request.name) + "', '')";
  }
  return "SELECT pg_advisory_unlock" + mode_suffix(request) + "(" + key.sql_arguments() + ")";
}

std::string unlock_if_held_sql(const acquire_request& request, const advisory_key& key) {
  return "SELECT pg_advisory_unlock" + mode_suffix(request) + "(" + key.sql_arguments() +
         ") FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = "
         "pg_backend_pid() AND " +
         pg_locks_match(key);
}

std::string listen_sql(const std::string& channel) { return "LISTEN \"" + channel + "\""; }

std::string unlisten_sql(const std::string& channel) { return "UNLISTEN \"" + channel + "\""; }

// A bigint key is classid (high 32 bits) and objid (low 32 bits).
std::string count_slots_sql(const std::string& name, std::uint32_t max_count) {
  const auto marker = max_count_marker(name, max_count);
  return "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
         "objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = ANY(" +
         slot_array(semaphore_base(name), max_count) +
         ")), (SELECT objid::bigint >> 8 FROM pg_locks WHERE locktype = 'advisory' "
         "AND granted AND objsubid = 2 AND classid::bigint = " +
         std::to_string(static_cast<std::uint32_t>(marker.high())) +
         " AND objid::bigint & 255 = 1 AND objid::bigint <> " +
         std::to_string(static_cast<std::uint32_t>(marker.low())) + " LIMIT 1)";
}

}  // namespace dlock::postgres::detail
