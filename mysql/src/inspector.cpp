// What the MySQL backend can tell an inspector, and an administrator's break (docs/mysql.md,
// "What inspect can see"): holders from the grant table's rows whose holder connection still
// holds their named lock (IS_USED_LOCK), or without a grant table the connections holding the
// name's named locks; waiters from the process list; the free slots of a semaphore; and a
// break that KILLs the connections holding the name's named locks.
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "lock_name.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

// The kind of a wait, from its GET_LOCK statement's text (statements.cpp): a writer's names
// the reader slots, a reader's only the gate. Nothing for an election's or upgrade gate's.
std::optional<party_kind> waiting_kind(const std::string& statement) {
  if (statement.find("'dlock:R0:") != std::string::npos) return party_kind::write;
  if (statement.find("'dlock:W:") != std::string::npos) return party_kind::read;
  if (statement.find("'dlock:S") != std::string::npos) return party_kind::semaphore_slot;
  if (statement.find("'dlock:L:") != std::string::npos) return party_kind::exclusive;
  return std::nullopt;
}

}  // namespace

query_result mysql_backend::query_now(std::string sql, const std::string& name) {
  if (running_in_this_thread()) {
    throw std::logic_error("dlock: mysql inspect on the provider's own thread would wait for "
                           "itself");
  }
  query_result r = call_and_wait<query_result>(
      executor(), options_.release_timeout, message("no answer in time", name),
      [self = shared_from_this(), sql = std::move(sql)](const blocking_reply<query_result>& reply) {
        self->pool_->session_for_attempt("")->connection->execute(
            sql, [reply](query_result r) { reply.set_value(std::move(r)); });
      });
  if (!r.ok()) std::rethrow_exception(failure(r, name));
  return r;
}

void mysql_backend::require_grant_table(const char* operation) const {
  if (options_.grant_table.empty()) {
    throw unsupported_operation(message(std::string(operation) +
                                        " needs options.grant_table, which is empty"));
  }
}

// A named lock records no max_count, so the count is of the slots `request` names; with a
// semaphore table, live holders that use another max_count make it the usual mismatch.
std::optional<std::uint32_t> mysql_backend::current_count(const acquire_request& request) {
  const query_result r = query_now(count_slots_sql(request, options_.semaphore_table),
                                   request.name);
  if (auto other = r.value(1)) throw max_count_mismatch(request, std::stoull(*other));
  const auto held = std::stoul(r.value().value_or("0"));
  return held >= request.max_count ? 0 : request.max_count - static_cast<std::uint32_t>(held);
}

// The holders the server knows of: which connection holds which of the name's named locks,
// with neither owner nor token nor start; those in `recorded` left out. A writer holds the
// gate and every reader slot; a connection that holds the gate and only some slots is a writer
// still waiting for readers to leave, which the process list shows as a waiter.
std::vector<lock_party> mysql_backend::holders_from_locks(const std::string& name,
                                                          const std::set<std::string>& recorded) {
  auto rows = query_now(held_locks_sql(name), name).rows;
  std::erase_if(rows, [&](const auto& row) { return recorded.contains(row.at(1).value_or("")); });
  std::map<std::string, std::uint32_t> reader_slots_of;
  std::set<std::string> at_gate;
  for (const auto& row : rows) {
    const std::string what = row.at(0).value_or(""), holder = row.at(1).value_or("");
    if (what == "W") at_gate.insert(holder);
    if (what == "R") ++reader_slots_of[holder];
  }
  std::vector<lock_party> holders;
  const auto party = [](party_kind kind, const std::string& holder) {
    return lock_party{.kind = kind, .owner = "connection " + holder};
  };
  for (const auto& row : rows) {
    const std::string what = row.at(0).value_or(""), holder = row.at(1).value_or("");
    if (what == "L") holders.push_back(party(party_kind::exclusive, holder));
    if (what == "S") holders.push_back(party(party_kind::semaphore_slot, holder));
    if (what == "R" && !at_gate.contains(holder)) {
      holders.push_back(party(party_kind::read, holder));
    }
  }
  for (const auto& holder : at_gate) {
    if (reader_slots_of[holder] == reader_slots) {
      holders.push_back(party(party_kind::write, holder));
    }
  }
  return holders;
}

// With a grant table, its live rows first (owner, token, start), then the holders that
// recorded none (clients without the table, plain GET_LOCK) by connection.
// A grant's token is known only from its row: without the table, or with every token 0, the
// server cannot tell one grant from the next.
bool mysql_backend::is_current(const acquire_request& request, std::uint64_t fencing_token) {
  if (options_.grant_table.empty()) throw no_token_records("grant_table is empty", request.name);
  if (options_.fencing_sequence.empty()) {
    throw no_token_records("fencing_sequence is empty", request.name);
  }
  return backend::is_current(request, fencing_token);
}

lock_inspection mysql_backend::inspect(const std::string& name) {
  lock_inspection found{.name = name};
  std::set<std::string> recorded;
  if (!options_.grant_table.empty()) {
    using std::chrono::microseconds;
    for (const auto& row : query_now(inspect_sql(options_.grant_table, name), name).rows) {
      lock_party holder{.kind = static_cast<party_kind>(std::stoi(row.at(0).value_or("0")))};
      if (row.at(1)) holder.fencing_token = std::stoull(*row.at(1));
      holder.since = std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              microseconds(std::stoll(row.at(2).value_or("0")))));
      holder.owner = from_hex(row.at(3).value_or(""));
      recorded.insert(row.at(4).value_or(""));
      found.holders.push_back(std::move(holder));
    }
  }
  for (auto& holder : holders_from_locks(name, recorded)) {
    found.holders.push_back(std::move(holder));
  }
  const auto now = std::chrono::system_clock::now();
  for (const auto& row : query_now(waiters_sql(name), name).rows) {
    const auto kind = waiting_kind(row.at(1).value_or(""));
    if (!kind) continue;
    const double waited_ms = std::stod(row.at(0).value_or("0"));
    found.waiters.push_back(lock_party{
        .kind = *kind,
        .since = now - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double, std::milli>(waited_ms))});
  }
  return found;
}

std::vector<lock_inspection> mysql_backend::list_locks(const std::string& prefix) {
  require_grant_table("list_locks");
  std::vector<lock_inspection> listed;
  for (const auto& row : query_now(list_sql(options_.grant_table, prefix), prefix).rows) {
    lock_inspection found = inspect(from_hex(row.at(0).value_or("")));
    if (found.held() || !found.waiters.empty()) listed.push_back(std::move(found));
  }
  std::sort(listed.begin(), listed.end(), [](const auto& a, const auto& b) {
    return a.held_since() < b.held_since();
  });
  return listed;
}

// KILL ends the holders' connections: the server frees every named lock they held (other
// names' too), their handles are marked lost, and the next grant's token comes later from
// the sequence.
void mysql_backend::break_lock(const std::string& name) {
  std::string kills;
  for (const auto& row : query_now(holders_sql(name), name).rows) {
    if (row.at(0)) kills += (kills.empty() ? "KILL CONNECTION " : "; KILL CONNECTION ") + *row.at(0);
  }
  if (!kills.empty()) query_now(kills, name);
}

}  // namespace dlock::mysql::detail
