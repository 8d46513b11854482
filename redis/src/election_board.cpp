// The Redis backend's election board (one server, Sentinel's master, a Cluster, where the
// election's keys share one slot, or RedLock's servers, each voting): the leader record is a
// hash beside the election's lock key in its hash tag, on every node, written there only while
// that node's lock key holds the proclaiming grant's token, extended by the watchdog and
// deleted by the release with the lock key (the scripts' KEYS[4]). A proclaim stands when a
// majority of the nodes took it; a reader shows a record only when a majority of the nodes
// show its term with their lock key still holding its grant (one node is its own majority).
// With Sentinel a term is the leadership's fencing token, which the epoch rule keeps rising
// across failovers; with RedLock it is the RedLock fencing token, above every node's counter
// of a majority (docs/redis-deployments.md). Observers are pushed (leader_watch) and still polled.
#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "eval.hpp"
#include "lease.hpp"
#include "leader_watch.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

namespace {

// KEYS: {lock, fence, owners, leader}; ARGV: grant token, term, value, sequence, how to
// publish (key_set::publish), leader channel. The sequence orders one term's proclaims, so a
// reader of a majority shows the latest of them (a majority that took it overlaps every
// majority read).
const char* const proclaim_source = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[4], 'term', ARGV[2], 'value', ARGV[3], 'grant', ARGV[1], 'seq', ARGV[4])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
redis.call(ARGV[5], ARGV[6], 'proclaimed')
return 1
)lua";

// KEYS: {lock, fence, owners, leader}; ARGV: term, how to publish, leader channel.
const char* const withdraw_source = R"lua(
if redis.call('HGET', KEYS[4], 'term') == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.call(ARGV[2], ARGV[3], 'withdrawn')
end
return 1
)lua";

// KEYS: {lock, fence, owners, leader}. Returns {term, value, sequence}, or an empty array.
const char* const leader_source = R"lua(
local record = redis.call('HMGET', KEYS[4], 'term', 'value', 'grant', 'seq')
if not record[1] or redis.call('GET', KEYS[1]) ~= record[3] then return {} end
return {record[1], record[2], record[4] or '0'}
)lua";

const script& stored(const char* source) {
  // Never destroyed, as scripts.cpp's: a provider's last work may run after main() returned.
  return *new script{source, naming::sha1_hex(source)};
}

// Orders the proclaims of this process (a term's proclaims all come from one lease, so from
// one process).
std::atomic<std::uint64_t> proclaim_sequence{0};

bool accepted(const command_result& result) noexcept {
  return confirmed(result) && result.value.type == reply::kind::integer &&
         result.value.integer == 1;
}

struct shown_record {
  std::uint64_t term;
  std::uint64_t sequence;
  std::string value;
};

std::optional<shown_record> record_in(const command_result& result) {
  if (!confirmed(result) || result.value.type != reply::kind::array ||
      result.value.elements.size() != 3) {
    return std::nullopt;
  }
  const auto& e = result.value.elements;
  return shown_record{std::stoull(e[0].text), std::stoull(e[2].text), e[1].text};
}

// The record a majority of `results` shows (one term; of its values, the latest proclaimed),
// and how many nodes answered at all.
struct majority_read {
  std::optional<leader_info> leader;
  std::size_t answered = 0;
  std::size_t most_agreeing = 0;  ///< the most nodes that showed one term (or no record)
};

majority_read read_majority(const std::vector<command_result>& results, std::size_t majority) {
  majority_read read;
  std::map<std::optional<std::uint64_t>, std::pair<std::size_t, std::optional<shown_record>>>
      by_term;
  for (const auto& result : results) {
    if (!confirmed(result)) continue;
    ++read.answered;
    const std::optional<shown_record> shown = record_in(result);
    auto& [count, latest] = by_term[shown ? std::optional(shown->term) : std::nullopt];
    ++count;
    if (shown && (!latest || shown->sequence > latest->sequence)) latest = shown;
    read.most_agreeing = std::max(read.most_agreeing, count);
    if (count >= majority && latest) read.leader = leader_info{latest->value, latest->term};
  }
  return read;
}

// A leader read of RedLock's nodes: settles as soon as a majority agree (on a term, or on
// showing none), or once no majority can; a silent minority costs nothing.
struct leader_fan_out {
  leader_fan_out(std::size_t nodes, std::size_t majority,
                 std::function<void(std::vector<command_result>)> done)
      : results(nodes, command_result{.failure = std::string(no_reply_yet)}),
        pending(nodes),
        majority(majority),
        done(std::move(done)) {}
  std::vector<command_result> results;
  std::size_t pending;
  std::size_t majority;
  std::function<void(std::vector<command_result>)> done;  ///< empty once settled

  void answer(std::size_t i, command_result result) {
    --pending;
    if (!done) return;
    results[i] = std::move(result);
    const majority_read read = read_majority(results, majority);
    const bool agreed = read.most_agreeing >= majority;
    const bool out_of_reach = read.most_agreeing + pending < majority;
    // As fan_out: "no majority agrees" is told apart from "no majority answered".
    const bool replies_known = read.answered >= majority || read.answered + pending < majority;
    if (agreed || (out_of_reach && replies_known) || pending == 0) {
      auto settle = std::move(done);
      done = nullptr;
      settle(std::move(results));
    }
  }
};

class redis_election_board final : public election_board {
 public:
  /// `inline_scripts`: run the scripts on the caller's thread (one fixed server), else on the
  /// network thread (RedLock's servers, Sentinel's master, a Cluster's slot).
  redis_election_board(std::shared_ptr<redis_backend> backend, bool inline_scripts)
      : backend_(std::move(backend)), inline_scripts_(inline_scripts) {}

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    static const script& proclaim_script = stored(proclaim_source);
    const held_grant& grant = dynamic_cast<const redis_lease&>(leadership).grant();
    const key_set keys = keys_of(election);
    const auto results = run(
        proclaim_script, keys,
        {grant.token, std::to_string(leadership.fencing_token()), std::string(value),
         std::to_string(++proclaim_sequence), keys.publish, leader_channel(keys)},
        {majority(), accepted}, election);
    const auto taken = std::ranges::count_if(results, accepted);
    if (std::cmp_less(taken, majority()) && std::cmp_less(answered(results), majority())) {
      throw connection_error(said(backend_->nodes().failures(results), election));
    }
    if (leadership.lost() || std::cmp_less(taken, majority())) {
      throw lock_lost_error(said("the lead of term " +
                                     std::to_string(leadership.fencing_token()) +
                                     " is over; proclaim refused",
                                 election));
    }
  }

  void withdraw(std::string_view election, const lease& leadership) override {
    static const script& withdraw_script = stored(withdraw_source);
    const key_set keys = keys_of(election);
    const auto results =
        run(withdraw_script, keys,
            {std::to_string(leadership.fencing_token()), keys.publish, leader_channel(keys)},
            {majority(), confirmed}, election);
    if (std::cmp_less(answered(results), majority())) {
      throw connection_error(said(backend_->nodes().failures(results), election));
    }
  }

  std::optional<leader_info> leader(std::string_view election) override {
    const auto results = read_records(election);
    const majority_read read = read_majority(results, majority());
    if (!read.leader && read.answered < majority()) {
      throw connection_error(said(backend_->nodes().failures(results), election));
    }
    return read.leader;
  }

  std::shared_ptr<void> watch(std::string_view election, std::function<void()> changed) override {
    return watch_leader(backend_, keys_of(election), std::move(changed));
  }

 private:
  std::size_t majority() const noexcept { return backend_->nodes().majority(); }

  static std::size_t answered(const std::vector<command_result>& results) {
    return static_cast<std::size_t>(std::ranges::count_if(results, confirmed));
  }

  std::string said(const std::string& what, std::string_view election) const {
    return backend_->message(what + " for election '" + naming::quote_for_message(election) +
                             "'");
  }

  key_set keys_of(std::string_view election) const {
    acquire_request request;
    request.kind = resource_kind::election;
    request.name = std::string(election);
    return backend_->keys_for(request);
  }

  // A server's refusal of a script is a bug or a misconfiguration, never a vote.
  void refused_script(const std::vector<command_result>& results, std::string_view election) {
    for (const auto& result : results) {
      if (!result.failure && result.value.is_error()) {
        throw dlock::error(said("the server refused the election script: " + result.value.text,
                                election));
      }
    }
  }

  std::vector<command_result> run(const script& which, const key_set& keys,
                                  const std::vector<std::string>& arguments, quorum_rule rule,
                                  std::string_view election) {
    std::vector<command_result> results;
    if (inline_scripts_) {
      results.push_back(backend_->nodes().eval_here(which, keys, arguments));
    } else {
      results = on_network_thread(election, [this, which = &which, keys, arguments, rule](
                                                auto settle) {
        backend_->nodes().eval_everywhere(*which, keys, arguments, rule, std::move(settle));
      });
    }
    refused_script(results, election);
    return results;
  }

  std::vector<command_result> read_records(std::string_view election) {
    static const script& leader_script = stored(leader_source);
    const key_set keys = keys_of(election);
    if (backend_->nodes().size() == 1) return run(leader_script, keys, {}, {1, confirmed}, election);
    auto results = on_network_thread(election, [this, keys](auto settle) {
      node_set& nodes = backend_->nodes();
      auto all = std::make_shared<leader_fan_out>(nodes.size(), nodes.majority(),
                                                  std::move(settle));
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        eval(nodes.at(i), leader_script, keys, {},
             [all, i](command_result result) { all->answer(i, std::move(result)); });
      }
    });
    refused_script(results, election);
    return results;
  }

  // Runs `start` on the network thread, handing it the function that settles the call.
  template <typename Start>
  std::vector<command_result> on_network_thread(std::string_view election, Start start) {
    return call_and_wait<std::vector<command_result>>(
        backend_->network_executor(), backend_->settings().release_timeout,
        said("no answer to the election script", election),
        [start = std::move(start)](const blocking_reply<std::vector<command_result>>& reply) {
          start([reply](std::vector<command_result> results) {
            reply.set_value(std::move(results));
          });
        });
  }

  std::shared_ptr<redis_backend> backend_;
  bool inline_scripts_;
};

}  // namespace

std::shared_ptr<election_board> redis_backend::elections() {
  return std::make_shared<redis_election_board>(shared_from_this(), on_callers_thread());
}

}  // namespace dlock::redis::detail
