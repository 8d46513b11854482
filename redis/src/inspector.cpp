// What Redis shows an inspector, and an administrator's break (docs/redis.md, "What inspect can
// see"). With RedLock, a grant counts where a majority of the nodes shows it.
#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <dlock/core/backend/blocking_call.hpp>

#include "backend.hpp"

namespace dlock::redis::detail {

namespace {

struct seen_party {
  lock_party party;
  bool waiting = false;
  std::size_t nodes = 0;
};

party_kind kind_of(const std::string& word) {
  if (word == "write" || word == "waiting-write") return party_kind::write;
  if (word == "read") return party_kind::read;
  if (word == "slot") return party_kind::semaphore_slot;
  return party_kind::exclusive;
}

// "<fencing token> <granted at, server ms> <owner>", as the acquire script records it.
void read_record(const std::string& record, lock_party& party) {
  const auto first = record.find(' ');
  const auto second = record.find(' ', first == std::string::npos ? first : first + 1);
  if (first == std::string::npos || second == std::string::npos) return;
  std::uint64_t token = 0;
  long long since_ms = 0;
  std::from_chars(record.data(), record.data() + first, token);
  std::from_chars(record.data() + first + 1, record.data() + second, since_ms);
  party.fencing_token = token;
  party.since = std::chrono::system_clock::time_point(std::chrono::milliseconds(since_ms));
  party.owner = record.substr(second + 1);
}

// Adds one node's answer ({max_count, {token, kind, record, ms left, ...}}) to `seen`.
bool add_answer(const reply& answer, std::map<std::string, seen_party>& seen,
                std::optional<std::uint32_t>& max_count) {
  if (answer.type != reply::kind::array || answer.elements.size() != 2) return false;
  const reply& count = answer.elements[0];
  const reply& parties = answer.elements[1];
  if (!count.text.empty()) max_count = static_cast<std::uint32_t>(std::stoul(count.text));
  for (std::size_t i = 0; i + 3 < parties.elements.size(); i += 4) {
    // A writer's token may be granted on some nodes and still queued on another.
    const bool waiting = parties.elements[i + 1].text == "waiting-write";
    auto& entry = seen[parties.elements[i].text + (waiting ? " waiting" : " holding")];
    const auto left = std::chrono::milliseconds(parties.elements[i + 3].integer);
    if (entry.nodes++ == 0) {
      entry.party.kind = kind_of(parties.elements[i + 1].text);
      entry.waiting = waiting;
      read_record(parties.elements[i + 2].text, entry.party);
      entry.party.lease_left = left;
    } else {
      entry.party.lease_left = std::min(*entry.party.lease_left,
                                        std::chrono::nanoseconds(left));
    }
  }
  return true;
}

}  // namespace

// .NET's keys hold bare tokens: no owner, fencing token or start per holder, no queue.
void redis_backend::refuse_in_dotnet_layout(std::string_view operation) const {
  if (!keys_.dotnet_layout()) return;
  throw unsupported_operation(message(
      std::string(operation) +
      " is not supported with layout=dotnet: .NET's keys record no owner, fencing token or "
      "waiter per holder (docs/dotnet.md)"));
}

// Plain keys and .NET's layout are other clients' keys: nothing records a grant's token.
bool redis_backend::is_current(const acquire_request& request, std::uint64_t fencing_token) {
  if (options_.plain_keys) throw no_token_records("plain_keys is on", request.name);
  if (keys_.dotnet_layout()) throw no_token_records("layout=dotnet", request.name);
  return backend::is_current(request, fencing_token);
}

lock_inspection redis_backend::inspect(const std::string& name) {
  if (network_->running_in_this_thread()) {
    throw std::logic_error("dlock: redis: inspect() called on the network thread");
  }
  refuse_in_dotnet_layout("inspect");
  const key_set keys = keys_.inspection_keys(name);
  return call_and_wait<lock_inspection>(
      network_->executor(), options_.release_timeout, message("no answer to inspect", name),
      [this, keys, name](const blocking_reply<lock_inspection>& reply) {
        nodes_->eval_everywhere(
            // Every node's answer (a silent one until command_timeout): a grant on a bare
            // majority would be missed by a majority of answers that included the third node.
            inspect_script(), keys, {}, {nodes_->size(), confirmed},
            [this, reply, name](std::vector<command_result> results) {
              lock_inspection found{.name = name};
              // Waiters for a lock or a slot only subscribe; queued writers alone show.
              found.waiters_visible = false;
              std::map<std::string, seen_party> seen;
              std::size_t answered = 0;
              for (const auto& r : results) {
                if (confirmed(r) && add_answer(r.value, seen, found.max_count)) ++answered;
              }
              if (answered < nodes_->majority()) {
                reply.set_error(std::make_exception_ptr(
                    connection_error(message(nodes_->failures(results), name))));
                return;
              }
              for (auto& [token, entry] : seen) {
                if (entry.nodes < nodes_->majority()) continue;
                (entry.waiting ? found.waiters : found.holders).push_back(std::move(entry.party));
              }
              std::stable_sort(found.holders.begin(), found.holders.end(),
                               [](const auto& a, const auto& b) { return a.since < b.since; });
              if (found.holders.empty()) found.max_count.reset();
              reply.set_value(std::move(found));
            });
      });
}

// Where list_locks SCANs and how many must answer: RedLock's nodes, a majority (a held name
// is on a majority, so the names that a majority's SCANs found include it); a Cluster's
// masters, every one (each name lives on one of them).
std::pair<std::vector<node*>, std::size_t> redis_backend::scanned_nodes(const std::string& prefix) {
  if (!nodes_->routed_by_slot()) {
    std::vector<node*> all;
    for (std::size_t i = 0; i < nodes_->size(); ++i) all.push_back(&nodes_->at(i));
    return {all, nodes_->majority()};
  }
  auto masters = call_and_wait<std::vector<node*>>(
      network_->executor(), options_.release_timeout,
      message("list_locks('" + prefix + "'): no answer from the cluster"),
      [this, prefix](const blocking_reply<std::vector<node*>>& reply) {
        nodes_->cluster_masters([this, reply, prefix](std::vector<node*> found,
                                                      std::optional<std::string> failure) {
          if (failure) {
            reply.set_error(std::make_exception_ptr(
                connection_error(message("list_locks('" + prefix + "'): " + *failure))));
          } else {
            reply.set_value(std::move(found));
          }
        });
      });
  const std::size_t count = masters.size();
  return {std::move(masters), count};
}

// SCAN walks a node in steps (COUNT per call), never blocking it like KEYS; a Cluster's masters
// are SCANned over their blocking connections as one server's (node::command_here).
std::vector<lock_inspection> redis_backend::list_locks(const std::string& prefix) {
  if (network_->running_in_this_thread()) {
    throw std::logic_error("dlock: redis: list_locks() called on the network thread");
  }
  refuse_in_dotnet_layout("list_locks");
  const std::string pattern = keys_.counters_pattern(prefix);
  const auto [targets, need] = scanned_nodes(prefix);
  std::set<std::string> names;
  std::string failures;
  std::size_t scanned = 0;
  for (node* target : targets) {
    node& at = *target;
    std::string cursor = "0";
    std::optional<std::string> failure;
    do {
      const command_result result =
          at.command_here({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      const reply& answer = result.value;
      if (result.failure || answer.type != reply::kind::array || answer.elements.size() != 2) {
        failure = result.failure ? *result.failure
                                 : "SCAN answered " + (answer.is_error() ? answer.text
                                                                         : "something else");
        break;
      }
      cursor = answer.elements[0].text;
      for (const reply& key : answer.elements[1].elements) {
        names.insert(keys_.name_of_counter(key.text));
      }
    } while (cursor != "0");
    if (failure) {
      failures += (failures.empty() ? "" : "; ") + at.endpoint() + ": " + *failure;
    } else {
      ++scanned;
    }
  }
  if (scanned < need) {
    throw connection_error(message("list_locks('" + prefix + "'): " + failures));
  }
  std::vector<lock_inspection> listed;
  for (const std::string& name : names) {
    auto found = inspect(name);
    if (found.held() || !found.waiters.empty()) listed.push_back(std::move(found));
  }
  return listed;
}

// The holders' watchdogs find their keys gone at their next extension ("not ours") and mark
// their handles lost; the fencing counter stays, so the next grant's token is higher.
void redis_backend::break_lock(const std::string& name) {
  if (network_->running_in_this_thread()) {
    throw std::logic_error("dlock: redis: break_lock() called on the network thread");
  }
  refuse_in_dotnet_layout("break_lock");
  const key_set keys = keys_.inspection_keys(name);
  // The publish command first, then the channels: a cluster's waiters listen on shard channels.
  std::vector<std::string> channels{keys_.publish_command()};
  for (auto& channel : keys_.release_channels(name)) channels.push_back(std::move(channel));
  call_and_wait<bool>(
      network_->executor(), options_.release_timeout, message("no answer to break_lock", name),
      [this, keys, channels, name](const blocking_reply<bool>& reply) {
        // Every node: a node left out would keep its share of a RedLock grant until expiry.
        nodes_->eval_everywhere(
            break_script(), keys, channels, {nodes_->size(), confirmed},
            [this, reply, name](std::vector<command_result> results) {
              if (std::count_if(results.begin(), results.end(), confirmed) <
                  static_cast<std::ptrdiff_t>(nodes_->majority())) {
                reply.set_error(std::make_exception_ptr(
                    connection_error(message(nodes_->failures(results), name))));
                return;
              }
              reply.set_value(true);
            });
      });
}

}  // namespace dlock::redis::detail
