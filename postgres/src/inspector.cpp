// What PostgreSQL shows an inspector, and an administrator's break (docs/postgres.md, "What
// inspect can see"): pg_locks says which sessions hold or wait for a key, and the owners'
// table (options.owners_table) what each grant recorded with it. A row counts only while
// pg_locks shows its session on its key; other rows are left-overs of sessions that ended
// without releasing, cleaned here once they are a minute old.
#include <stdexcept>
#include <string>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "board_connection.hpp"
#include "semaphore_keys.hpp"
#include "upgrade_gate_key.hpp"

namespace dlock::postgres::detail {

namespace {

party_kind kind_of(std::string_view word) {
  if (word == "read") return party_kind::read;
  if (word == "write") return party_kind::write;
  if (word == "semaphore slot") return party_kind::semaphore_slot;
  return party_kind::exclusive;
}

std::string text_of(const PGresult* rows, int row, int column) {
  return std::string(PQgetvalue(rows, row, column), PQgetlength(rows, row, column));
}

// The owners' row `g` is on its session's pg_locks row `l`.
const char* const row_on_lock =
    "l.locktype = 'advisory' AND l.pid = g.pid AND l.classid::bigint = g.classid AND "
    "l.objid::bigint = g.objid AND l.objsubid = g.objsubid";

// pg_locks rows of the name's own key and its upgrade gate, and the slot-count marker that
// every holder of one of its semaphore's slots holds too.
std::string keys_of_name(const std::string& name) {
  const auto marker_high = static_cast<std::uint32_t>(max_count_marker(name, 1).high());
  return "(" + pg_locks_match(advisory_key::from_name(name)) + ") OR (" +
         pg_locks_match(upgrade_gate_key(name)) +
         ") OR (objsubid = 2 AND classid::bigint = " + std::to_string(marker_high) +
         " AND objid::bigint & 255 = 1)";
}

}  // namespace

board_connection& postgres_backend::inspector_connection() {
  std::lock_guard lock(board_mutex_);
  if (!inspector_connection_) {
    inspector_connection_ = std::make_unique<board_connection>(
        options_, endpoint_,
        owners_.table.empty() ? std::string() : create_owners_table_sql(owners_.table));
  }
  return *inspector_connection_;
}

query_result postgres_backend::inspector_query(const std::string& sql, const std::string& bytes,
                                               const std::string& what) {
  query_result r = inspector_connection().run(sql, {{bytes, bytea_oid}});
  if (r.connection_broken) throw connection_error(message(r.message + " (" + what + ")"));
  if (!r.ok()) {
    throw dlock::error(message("the server refused " + what + " (SQLSTATE " + r.sqlstate +
                               "): " + r.message));
  }
  return r;
}

// One statement: the recorded parties that pg_locks confirms, then the sessions on the name's
// lock key that recorded nothing (other clients, or owners_table off), named by their pid.
// A grant's token is known only from its row: without the table, or with every token 0, the
// server cannot tell one grant from the next.
bool postgres_backend::is_current(const acquire_request& request, std::uint64_t fencing_token) {
  if (options_.owners_table.empty()) throw no_token_records("owners_table is empty", request.name);
  if (options_.fencing_sequence.empty()) {
    throw no_token_records("fencing_sequence is empty", request.name);
  }
  return backend::is_current(request, fencing_token);
}

lock_inspection postgres_backend::inspect(const std::string& name) {
  naming::validate_name(name);
  const std::string of_name = " inspecting '" + naming::quote_for_message(name) + "'";
  const std::string lock_key = pg_locks_match(advisory_key::from_name(name));
  std::string sql;
  if (!owners_.table.empty()) {
    sql = "SELECT g.kind, g.token::text, (extract(epoch FROM g.since) * 1000000)::bigint::text, "
          "g.owner, l.granted::text FROM " + owners_.table + " AS g JOIN pg_locks AS l ON " +
          row_on_lock + " WHERE g.name = $1 UNION ALL ";
  }
  sql += "SELECT CASE WHEN l.mode = 'ShareLock' THEN 'read' ELSE 'exclusive' END, NULL, NULL, "
         "convert_to('pid ' || l.pid, 'UTF8'), l.granted::text FROM pg_locks AS l WHERE "
         "l.locktype = 'advisory' AND $1 IS NOT NULL AND " + lock_key;
  if (!owners_.table.empty()) {
    sql += " AND NOT EXISTS (SELECT 1 FROM " + owners_.table + " AS g WHERE " + row_on_lock +
           ")";
  }
  sql += " ORDER BY 3";
  const query_result r = inspector_query(sql, name, "the query" + of_name);
  lock_inspection found;
  found.name = name;
  bool any_slot = false;
  for (int row = 0; row < PQntuples(r.rows.get()); ++row) {
    const PGresult* rows = r.rows.get();
    lock_party party;
    party.kind = kind_of(text_of(rows, row, 0));
    any_slot = any_slot || party.kind == party_kind::semaphore_slot;
    if (!PQgetisnull(rows, row, 1)) party.fencing_token = std::stoull(text_of(rows, row, 1));
    if (!PQgetisnull(rows, row, 2)) {
      party.since = std::chrono::system_clock::time_point(
          std::chrono::microseconds(std::stoll(text_of(rows, row, 2))));
    }
    party.owner = text_of(rows, row, 3);
    (text_of(rows, row, 4) == "true" ? found.holders : found.waiters).push_back(party);
  }
  // A semaphore's waiters only LISTEN, which pg_locks does not show.
  found.waiters_visible = !any_slot;
  if (any_slot) {
    const auto marker_high = static_cast<std::uint32_t>(max_count_marker(name, 1).high());
    const query_result count = inspector_query(
        "SELECT (objid::bigint >> 8)::text FROM pg_locks WHERE locktype = 'advisory' AND "
        "granted AND $1 IS NOT NULL AND objsubid = 2 AND objid::bigint & 255 = 1 AND "
        "classid::bigint = " + std::to_string(marker_high) + " LIMIT 1",
        name, "the slot count query" + of_name);
    if (PQntuples(count.rows.get()) == 1) {
      found.max_count = static_cast<std::uint32_t>(std::stoul(text_of(count.rows.get(), 0, 0)));
    }
  }
  forget_ended(" AND g.name = $1", name);
  return found;
}

// The names recorded under the prefix that pg_locks confirms; unrecorded holders (other
// clients, owners_table off) carry no name and are not listed.
std::vector<lock_inspection> postgres_backend::list_locks(const std::string& prefix) {
  if (owners_.table.empty()) {
    throw unsupported_operation(message("list_locks needs options.owners_table"));
  }
  const std::string of_prefix = "substring(g.name FROM 1 FOR length($1)) = $1";
  const query_result r = inspector_query(
      "SELECT DISTINCT g.name FROM " + owners_.table + " AS g JOIN pg_locks AS l ON " +
          row_on_lock + " WHERE " + of_prefix,
      prefix, "the list of names under '" + naming::quote_for_message(prefix) + "'");
  std::vector<lock_inspection> listed;
  for (int row = 0; row < PQntuples(r.rows.get()); ++row) {
    listed.push_back(inspect(text_of(r.rows.get(), row, 0)));
  }
  forget_ended(" AND " + of_prefix, prefix);
  return listed;
}

// Ends every session that holds one of the name's keys: the server frees all it held, which
// takes the other locks of a shared session too (docs/postgres.md), and marks their handles
// lost. Tokens come from the sequence, so the next grant's is higher.
void postgres_backend::break_lock(const std::string& name) {
  naming::validate_name(name);
  std::string recorded;
  if (!owners_.table.empty()) {
    recorded = " OR EXISTS (SELECT 1 FROM " + owners_.table + " AS g WHERE g.name = $1 AND " +
               row_on_lock + ")";
  }
  inspector_query("SELECT pg_terminate_backend(pid) FROM (SELECT DISTINCT l.pid FROM pg_locks "
                  "AS l WHERE l.locktype = 'advisory' AND l.granted AND $1 IS NOT NULL AND "
                  "(" + keys_of_name(name) + recorded + ")) AS holders",
                  name, "the break of '" + naming::quote_for_message(name) + "'");
}

// Rows of sessions that ended without releasing; a minute's grace keeps a waiter's row,
// written just before its wait shows in pg_locks.
void postgres_backend::forget_ended(const std::string& which, const std::string& bytes) {
  if (owners_.table.empty()) return;
  inspector_query("DELETE FROM " + owners_.table + " AS g WHERE g.since < clock_timestamp() - "
                  "interval '1 minute'" + which + " AND NOT EXISTS (SELECT 1 FROM pg_locks AS l "
                  "WHERE " + row_on_lock + ")",
                  bytes, "the cleaning of ended sessions' owner rows");
}

}  // namespace dlock::postgres::detail
