#include "statements.hpp"

#include <cstdio>
#include <stdexcept>

#include "lock_name.hpp"

namespace dlock::mysql::detail {

namespace {

std::string quoted(const std::string& server_name) { return "'" + server_name + "'"; }

std::string seconds(std::chrono::nanoseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f",
                std::chrono::duration<double>(std::max(duration, std::chrono::nanoseconds{}))
                    .count());
  return text;
}

std::string lock_name(const acquire_request& r) {
  return quoted(server_name(name_space::lock, r.name));
}
std::string upgrade_gate(const acquire_request& r) {
  return quoted(server_name(name_space::upgrade_gate, r.name));
}
std::string gate(const acquire_request& r) {
  return quoted(server_name(name_space::writer_gate, r.name));
}
std::string reader(const acquire_request& r, std::uint32_t slot) {
  return quoted(server_name(name_space::reader_slot, r.name, slot));
}
std::string semaphore_slot(const acquire_request& r, std::uint32_t slot) {
  return quoted(server_name(name_space::semaphore_slot, r.name, slot));
}

bool writes(const acquire_request& r) {
  return r.kind == resource_kind::reader_writer_lock && r.mode == lock_mode::exclusive;
}

// The first of `count` slots that GET_LOCK(..., 0) grants, or NULL.
template <typename Slot>
std::string first_free(std::uint32_t count, Slot slot) {
  std::string sql = "CASE";
  for (std::uint32_t i = 0; i < count; ++i) {
    sql += " WHEN GET_LOCK(" + slot(i) + ", 0) = 1 THEN " + std::to_string(i);
  }
  return sql + " END";
}

// The party kind recorded in the grant table, and the named lock a grant of `r` holds (by
// @dlock_slot where it has slots); nothing for the upgrade gate, whose holder also holds a
// reader slot, recorded as such.
std::optional<std::pair<party_kind, std::string>> recorded_grant(const acquire_request& r) {
  const auto by_slot = [&](std::uint32_t count, auto slot) {
    std::string held = "ELT(@dlock_slot + 1";
    for (std::uint32_t i = 0; i < count; ++i) held += ", " + slot(i);
    return held + ")";
  };
  switch (r.kind) {
    case resource_kind::lock: return std::pair{party_kind::exclusive, lock_name(r)};
    case resource_kind::reader_writer_lock:
      if (writes(r)) return std::pair{party_kind::write, gate(r)};
      return std::pair{party_kind::read,
                       by_slot(reader_slots, [&](std::uint32_t i) { return reader(r, i); })};
    case resource_kind::semaphore:
      return std::pair{party_kind::semaphore_slot, by_slot(r.max_count, [&](std::uint32_t i) {
                         return semaphore_slot(r, i);
                       })};
    case resource_kind::upgrade_gate:
    case resource_kind::election: break;
  }
  return std::nullopt;
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The batch's last statements: the fencing token when `granted`, the grant's row in the grant
// table (written by the holding connection, so its holder is CONNECTION_ID()), then the slot
// and the token. NEXTVAL opens the sequence, which holds a metadata lock on it until the
// statement ends; in a statement after the GET_LOCK it is never held through a wait (a waiting
// statement would block CREATE SEQUENCE and any other DDL on it for as long as it waits).
// Without a row to write, the token is read in the last statement itself: a statement fewer
// per attempt is a sixth of an uncontended cycle.
std::string finish(const acquire_request& r, const statement_settings& settings,
                   const std::string& slot, const std::string& granted,
                   const std::string& extra = {}) {
  const auto recorded = recorded_grant(r);
  if (settings.grant_table.empty() || !recorded) {
    return "; SELECT IF(" + granted + ", " + slot + ", NULL), IF(" + granted + ", " +
           settings.token + ", NULL)" + extra;
  }
  std::string sql = "; SELECT @dlock_token := IF(" + granted + ", " + settings.token + ", NULL)";
  sql += "; REPLACE INTO " + settings.grant_table +
         " (server_lock, name_hash, name, kind, token, since_us, owner, holder) SELECT " +
         recorded->second + ", '" + name_hash(r.name) + "', UNHEX('" + hex(r.name) + "'), " +
         std::to_string(static_cast<int>(recorded->first)) +
         ", @dlock_token, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED), UNHEX('" +
         hex(r.owner) + "'), CONNECTION_ID() FROM DUAL WHERE @dlock_token IS NOT NULL";
  return sql + "; SELECT IF(" + granted + ", " + slot + ", NULL), @dlock_token" + extra;
}

std::string reader_attempt(const acquire_request& r, const statement_settings& settings,
                           std::chrono::nanoseconds wait) {
  const auto slot = [&](std::uint32_t i) { return reader(r, i); };
  if (wait > std::chrono::nanoseconds::zero()) {
    // Behind the writer gate: a waiting writer holds it, so readers queue behind writers.
    return "SELECT @dlock_gate := GET_LOCK(" + gate(r) + ", " + seconds(wait) +
           "); SELECT @dlock_slot := IF(@dlock_gate = 1, " + first_free(reader_slots, slot) +
           ", NULL); DO RELEASE_LOCK(" + gate(r) + ")" +
           finish(r, settings, "@dlock_slot", "@dlock_slot IS NOT NULL", ", 1");
  }
  // A slot, kept only while no writer holds or waits at the gate.
  std::string give_back = "CASE @dlock_slot";
  for (std::uint32_t i = 0; i < reader_slots; ++i) {
    give_back += " WHEN " + std::to_string(i) + " THEN RELEASE_LOCK(" + slot(i) + ")";
  }
  give_back += " ELSE 0 END";
  return "SELECT @dlock_slot := IF(IS_FREE_LOCK(" + gate(r) + ") = 1, " +
         first_free(reader_slots, slot) + ", NULL), @dlock_kept := (@dlock_slot IS NOT NULL "
         "AND IS_FREE_LOCK(" + gate(r) + ") = 1); DO IF(@dlock_kept, 0, " + give_back + ")" +
         finish(r, settings, "@dlock_slot", "@dlock_kept", ", IS_FREE_LOCK(" + gate(r) + ")");
}

std::string writer_attempt(const acquire_request& r, const statement_settings& settings,
                           std::chrono::nanoseconds wait) {
  const std::string limit = seconds(wait);
  std::string all = "GET_LOCK(" + gate(r) + ", " + limit + ") = 1";
  std::string give_back = "DO IF(@dlock_won, 0, RELEASE_LOCK(" + gate(r) + "))";
  for (std::uint32_t i = 0; i < reader_slots; ++i) {
    all += " AND GET_LOCK(" + reader(r, i) + ", " + limit + ") = 1";
    give_back += ", IF(@dlock_won, 0, RELEASE_LOCK(" + reader(r, i) + "))";
  }
  return "SELECT @dlock_won := (" + all + "); " + give_back + finish(r, settings, "0", "@dlock_won");
}

// The max_count of a live holder of semaphore `r` that uses another one. A row is live while
// its holder's connection holds its slot: the rows of holders that are gone are ignored.
std::string other_count(const acquire_request& r, const std::string& table) {
  return "(SELECT max_count FROM " + table + " WHERE semaphore = '" + name_hash(r.name) +
         "' AND max_count <> " + std::to_string(r.max_count) +
         " AND IS_USED_LOCK(slot_lock) = holder LIMIT 1)";
}

// `take` gives the slot taken or NULL. With a semaphore table, the attempt takes nothing while
// live holders use another max_count, records its own count in its slot's row once it holds
// the slot, and looks again, because two first holders of different counts may have looked
// at the same time: of two such, the one that looks last sees the other's row (each writes
// before it looks), and gives its slot back. Rows of holders that are gone go on the way.
std::string semaphore_attempt(const acquire_request& r, const statement_settings& settings,
                              const std::string& take) {
  if (settings.semaphore_table.empty()) {
    return "SELECT @dlock_slot := " + take +
           finish(r, settings, "@dlock_slot", "@dlock_slot IS NOT NULL");
  }
  const std::string& table = settings.semaphore_table;
  std::string held = "ELT(@dlock_slot + 1";
  for (std::uint32_t i = 0; i < r.max_count; ++i) held += ", " + semaphore_slot(r, i);
  held += ")";
  const std::string hash = "'" + name_hash(r.name) + "'";
  return "SELECT @dlock_other := " + other_count(r, table) +
         "; SELECT @dlock_slot := IF(@dlock_other IS NULL, " + take +
         ", NULL); SET @dlock_held = " + held + "; REPLACE INTO " + table +
         " (slot_lock, semaphore, max_count, holder) SELECT @dlock_held, " + hash + ", " +
         std::to_string(r.max_count) +
         ", CONNECTION_ID() FROM DUAL WHERE @dlock_held IS NOT NULL"
         "; SELECT @dlock_other := IF(@dlock_held IS NULL, @dlock_other, " +
         other_count(r, table) +
         "); DO IF(@dlock_held IS NOT NULL AND @dlock_other IS NOT NULL, "
         "RELEASE_LOCK(@dlock_held), 0); DELETE FROM " + table + " WHERE semaphore = " + hash +
         " AND NOT (IS_USED_LOCK(slot_lock) <=> holder)" +
         finish(r, settings, "@dlock_slot", "@dlock_slot IS NOT NULL AND @dlock_other IS NULL",
                ", @dlock_other");
}

}  // namespace

statement_settings statement_settings_of(const options& opts) {
  return {opts.fencing_sequence.empty() ? "0" : "NEXTVAL(" + opts.fencing_sequence + ")",
          opts.semaphore_table, opts.election_table, opts.grant_table};
}

void validate_object_name(const char* field, const std::string& object) {
  const auto part_ok = [](std::string_view part) {
    return !part.empty() && part.size() <= 64 &&
           part.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789_$") == std::string_view::npos;
  };
  if (object.empty()) return;
  const auto dot = object.find('.');
  const std::string_view text = object;
  if (dot == std::string::npos ? part_ok(text)
                               : part_ok(text.substr(0, dot)) && part_ok(text.substr(dot + 1))) {
    return;
  }
  throw std::invalid_argument("dlock: mysql: options." + std::string(field) + " '" + object +
                              "' must be name or schema.name of letters, digits, '_' and '$'");
}

std::string server_lease_sql(std::chrono::nanoseconds server_lease) {
  const auto lease_seconds =
      std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(server_lease).count());
  return "SET SESSION wait_timeout = " + std::to_string(lease_seconds);
}

namespace {

// `ddl` only when `object` is missing: even CREATE ... IF NOT EXISTS waits for an exclusive
// metadata lock on the name, and every statement of every client that uses it (NEXTVAL, the
// semaphore table's reads) queues behind it meanwhile.
std::string create_if_missing_sql(const std::string& object, const std::string& ddl) {
  const auto dot = object.find('.');
  const std::string schema =
      dot == std::string::npos ? "DATABASE()" : "'" + object.substr(0, dot) + "'";
  const std::string name = dot == std::string::npos ? object : object.substr(dot + 1);
  // PREPARE rather than MariaDB's EXECUTE IMMEDIATE: MySQL has only the former.
  return "SELECT COUNT(*) INTO @dlock_found FROM information_schema.TABLES WHERE "
         "TABLE_SCHEMA = " + schema + " AND TABLE_NAME = '" + name +
         "'; SET @dlock_ddl = IF(@dlock_found = 0, '" + ddl +
         "', 'DO 0'); PREPARE dlock_ddl FROM @dlock_ddl; EXECUTE dlock_ddl; "
         "DEALLOCATE PREPARE dlock_ddl";
}

}  // namespace

// The semaphore table is a MEMORY table: its rows mean something only while their holders'
// named locks exist, which a server restart ends too, so nothing in it needs to last, and a
// grant costs no disk write. The election table holds values of any length, which MEMORY
// tables cannot (no BLOBs).
std::string create_objects_sql(const options& opts) {
  std::vector<std::string> parts;
  if (!opts.fencing_sequence.empty()) {
    parts.push_back(create_if_missing_sql(
        opts.fencing_sequence, "CREATE SEQUENCE IF NOT EXISTS " + opts.fencing_sequence));
  }
  if (!opts.semaphore_table.empty()) {
    parts.push_back(create_if_missing_sql(
        opts.semaphore_table,
        "CREATE TABLE IF NOT EXISTS " + opts.semaphore_table +
            " (slot_lock VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY "
            "KEY, semaphore CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, max_count "
            "INT UNSIGNED NOT NULL, holder BIGINT UNSIGNED NOT NULL, KEY (semaphore)) "
            "ENGINE = MEMORY"));
  }
  if (!opts.election_table.empty()) {
    parts.push_back(create_if_missing_sql(
        opts.election_table,
        "CREATE TABLE IF NOT EXISTS " + opts.election_table +
            " (election_lock VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL "
            "PRIMARY KEY, term BIGINT UNSIGNED NOT NULL, value MEDIUMBLOB NULL, holder BIGINT "
            "UNSIGNED NOT NULL) ENGINE = InnoDB"));
  }
  if (!opts.grant_table.empty()) {
    parts.push_back(create_if_missing_sql(
        opts.grant_table,
        "CREATE TABLE IF NOT EXISTS " + opts.grant_table +
            " (server_lock VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY "
            "KEY, name_hash CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, name "
            "VARBINARY(1024) NOT NULL, kind TINYINT UNSIGNED NOT NULL, token BIGINT UNSIGNED, "
            "since_us BIGINT UNSIGNED NOT NULL, owner VARBINARY(256) NOT NULL, holder BIGINT "
            "UNSIGNED NOT NULL, KEY (name_hash)) ENGINE = MEMORY"));
  }
  std::string sql;
  for (const auto& part : parts) sql += (sql.empty() ? "" : "; ") + part;
  return sql;
}

namespace {

std::string election_lock(std::string_view election) {
  return quoted(server_name(name_space::election, election));
}

// The grant writes the record of its term, without a value yet, only while its connection
// holds the election's lock; the term is read in a statement of its own (finish()).
std::string election_attempt(const acquire_request& r, const statement_settings& settings,
                             std::chrono::nanoseconds wait) {
  const std::string lock = election_lock(r.name);
  return "SELECT @dlock_slot := IF(GET_LOCK(" + lock + ", " + seconds(wait) +
         ") = 1, 0, NULL); SELECT @dlock_term := IF(@dlock_slot IS NOT NULL, " +
         settings.token + ", NULL); REPLACE INTO " + settings.election_table +
         " (election_lock, term, value, holder) SELECT " + lock +
         ", @dlock_term, NULL, CONNECTION_ID() FROM DUAL WHERE @dlock_term IS NOT NULL AND "
         "IS_USED_LOCK(" + lock + ") = CONNECTION_ID(); SELECT @dlock_slot, @dlock_term";
}

}  // namespace

std::string from_hex(const std::string& digits) {
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'A' + 10; };
  std::string bytes;
  for (std::size_t i = 0; i + 1 < digits.size(); i += 2) {
    bytes += static_cast<char>(nibble(digits[i]) << 4 | nibble(digits[i + 1]));
  }
  return bytes;
}

std::string proclaim_sql(const std::string& table, std::string_view election, std::uint64_t term,
                         std::string_view value) {
  const std::string record = " WHERE election_lock = " + election_lock(election) +
                             " AND term = " + std::to_string(term);
  return "UPDATE " + table + " SET value = UNHEX('" + hex(value) + "')" + record +
         " AND IS_USED_LOCK(election_lock) = holder; SELECT COUNT(*) FROM " + table + record +
         " AND IS_USED_LOCK(election_lock) = holder";
}

std::string withdraw_sql(const std::string& table, std::string_view election,
                         std::uint64_t term) {
  return "DELETE FROM " + table + " WHERE election_lock = " + election_lock(election) +
         " AND term = " + std::to_string(term);
}

std::string leader_sql(const std::string& table, std::string_view election) {
  return "SELECT term, HEX(value) FROM " + table +
         " WHERE election_lock = " + election_lock(election) +
         " AND value IS NOT NULL AND IS_USED_LOCK(election_lock) = holder";
}

std::string attempt_sql(const acquire_request& r, const statement_settings& settings,
                        std::chrono::nanoseconds wait, std::uint32_t slot) {
  const std::string taken = finish(r, settings, "@dlock_slot", "@dlock_slot IS NOT NULL");
  switch (r.kind) {
    case resource_kind::lock:
    case resource_kind::upgrade_gate:
      return "SELECT @dlock_slot := IF(GET_LOCK(" +
             (r.kind == resource_kind::lock ? lock_name(r) : upgrade_gate(r)) + ", " +
             seconds(wait) + ") = 1, 0, NULL)" + taken;
    case resource_kind::reader_writer_lock:
      return writes(r) ? writer_attempt(r, settings, wait) : reader_attempt(r, settings, wait);
    case resource_kind::election:
      if (!settings.election_table.empty()) return election_attempt(r, settings, wait);
      return "SELECT @dlock_slot := IF(GET_LOCK(" + election_lock(r.name) + ", " +
             seconds(wait) + ") = 1, 0, NULL)" + taken;
    case resource_kind::semaphore: {
      const std::string any_slot =
          first_free(r.max_count, [&](std::uint32_t i) { return semaphore_slot(r, i); });
      if (wait > std::chrono::nanoseconds::zero()) {
        // Waits at one slot; when the wait runs out, tries every slot once.
        return semaphore_attempt(r, settings,
                                 "IF(GET_LOCK(" + semaphore_slot(r, slot) + ", " +
                                     seconds(wait) + ") = 1, " + std::to_string(slot) + ", " +
                                     any_slot + ")");
      }
      return semaphore_attempt(r, settings, any_slot);
    }
  }
  throw std::logic_error("dlock: mysql: unknown primitive");
}

std::string release_sql(const acquire_request& r, const statement_settings& settings,
                        std::optional<std::uint32_t> slot) {
  std::string sql = "DO ";
  bool first = true;
  for (const std::string& name : names_of(r)) {
    if (slot && name != checked_name(r, *slot)) continue;
    sql += (first ? "RELEASE_LOCK(" : ", RELEASE_LOCK(") + quoted(name) + ")";
    first = false;
  }
  if (r.kind == resource_kind::semaphore && !settings.semaphore_table.empty()) {
    sql += "; DELETE FROM " + settings.semaphore_table + " WHERE semaphore = '" +
           name_hash(r.name) + "' AND holder = CONNECTION_ID()";
  }
  if (!settings.grant_table.empty() && recorded_grant(r)) {
    sql += "; DELETE FROM " + settings.grant_table + " WHERE name_hash = '" + name_hash(r.name) +
           "' AND holder = CONNECTION_ID() AND kind IN (";
    switch (r.kind) {
      case resource_kind::reader_writer_lock:
        sql += std::to_string(static_cast<int>(party_kind::read)) + ", " +
               std::to_string(static_cast<int>(party_kind::write)) + ")";
        break;
      default: sql += std::to_string(static_cast<int>(recorded_grant(r)->first)) + ")";
    }
  }
  if (r.kind == resource_kind::election && !settings.election_table.empty()) {
    sql += "; DELETE FROM " + settings.election_table + " WHERE election_lock = " +
           election_lock(r.name) + " AND holder = CONNECTION_ID()";
  }
  return sql;
}

std::string checked_name(const acquire_request& r, std::uint32_t slot) {
  switch (r.kind) {
    case resource_kind::lock: return server_name(name_space::lock, r.name);
    case resource_kind::upgrade_gate: return server_name(name_space::upgrade_gate, r.name);
    case resource_kind::reader_writer_lock:
      return writes(r) ? server_name(name_space::writer_gate, r.name)
                       : server_name(name_space::reader_slot, r.name, slot);
    case resource_kind::semaphore: return server_name(name_space::semaphore_slot, r.name, slot);
    case resource_kind::election: return server_name(name_space::election, r.name);
  }
  throw std::logic_error("dlock: mysql: unknown primitive");
}

std::vector<std::string> names_of(const acquire_request& r) {
  std::vector<std::string> names;
  switch (r.kind) {
    case resource_kind::lock: names.push_back(server_name(name_space::lock, r.name)); break;
    case resource_kind::upgrade_gate:
      names.push_back(server_name(name_space::upgrade_gate, r.name));
      break;
    case resource_kind::reader_writer_lock:
      names.push_back(server_name(name_space::writer_gate, r.name));
      for (std::uint32_t i = 0; i < reader_slots; ++i) {
        names.push_back(server_name(name_space::reader_slot, r.name, i));
      }
      break;
    case resource_kind::semaphore:
      for (std::uint32_t i = 0; i < r.max_count; ++i) {
        names.push_back(server_name(name_space::semaphore_slot, r.name, i));
      }
      break;
    case resource_kind::election: names.push_back(server_name(name_space::election, r.name)); break;
  }
  return names;
}

std::string probe_sql(const std::vector<std::string>& names) {
  std::string sql = "SELECT CONNECTION_ID()";
  for (const auto& name : names) sql += ", IS_USED_LOCK(" + quoted(name) + ")";
  return sql;
}

std::string kill_query_sql(std::uint64_t thread_id) {
  return "KILL QUERY " + std::to_string(thread_id);
}

std::string count_slots_sql(const acquire_request& r, const std::string& semaphore_table) {
  std::string sql = "SELECT 0";
  for (std::uint32_t i = 0; i < r.max_count; ++i) {
    sql += " + (IS_USED_LOCK(" + semaphore_slot(r, i) + ") IS NOT NULL)";
  }
  return sql + ", " + (semaphore_table.empty() ? "NULL" : other_count(r, semaphore_table));
}

std::string inspect_sql(const std::string& grant_table, const std::string& name) {
  const std::string hash = name_hash(name);
  return "DELETE FROM " + grant_table + " WHERE name_hash = '" + hash +
         "' AND NOT (IS_USED_LOCK(server_lock) <=> holder); SELECT kind, token, since_us, "
         "HEX(owner), holder FROM " + grant_table + " WHERE name_hash = '" + hash +
         "' ORDER BY since_us";
}

std::string list_sql(const std::string& grant_table, std::string_view prefix) {
  return "SELECT DISTINCT HEX(name) FROM " + grant_table + " WHERE LEFT(name, " +
         std::to_string(prefix.size()) + ") = UNHEX('" + hex(prefix) +
         "') AND IS_USED_LOCK(server_lock) = holder";
}

std::string waiters_sql(const std::string& name) {
  return "SELECT TIME_MS, INFO FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' "
         "AND INFO LIKE '%:" + name_hash(name) + ":%' ORDER BY TIME_MS DESC";
}

std::string held_locks_sql(const std::string& name) {
  std::string sql;
  const auto add = [&](char what, name_space space, std::uint32_t slots) {
    for (std::uint32_t i = 0; i < slots; ++i) {
      sql += std::string(sql.empty() ? "SELECT '" : " UNION ALL SELECT '") + what +
             "' AS what, IS_USED_LOCK(" + quoted(server_name(space, name, i)) + ") AS holder";
    }
  };
  add('L', name_space::lock, 1);
  add('W', name_space::writer_gate, 1);
  add('R', name_space::reader_slot, reader_slots);
  add('S', name_space::semaphore_slot, max_semaphore_slots);
  return "SELECT what, holder FROM (" + sql + ") AS held WHERE holder IS NOT NULL";
}

std::string holders_sql(const std::string& name) {
  acquire_request every;
  every.name = name;
  std::vector<std::string> names;
  for (resource_kind kind : {resource_kind::lock, resource_kind::reader_writer_lock,
                             resource_kind::semaphore, resource_kind::upgrade_gate}) {
    every.kind = kind;
    every.max_count = max_semaphore_slots;
    for (auto& one : names_of(every)) names.push_back(std::move(one));
  }
  std::string sql = "SELECT DISTINCT holder FROM (";
  for (std::size_t i = 0; i < names.size(); ++i) {
    sql += (i ? " UNION ALL SELECT IS_USED_LOCK(" : "SELECT IS_USED_LOCK(") + quoted(names[i]) +
           ") AS holder";
  }
  return sql + ") AS held WHERE holder IS NOT NULL";
}

}  // namespace dlock::mysql::detail
