// The Redis backend's election board (one server, Sentinel's master, or a Cluster, where the
// election's keys share one slot; RedLock has none): the leader record is a hash beside the
// election's lock key in its hash tag, written only while the lock key holds the proclaiming
// grant's token, extended by the watchdog and deleted by the release with the lock key (the
// scripts' KEYS[4]); a reader shows it only while the lock key still holds that grant.
// Observers poll (the core default). With Sentinel a term is the leadership's fencing token,
// which the epoch rule keeps rising across failovers (docs/redis.md, "Sentinel").
#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "lease.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

namespace {

// KEYS: {lock, fence, owners, leader}; ARGV: grant token, term, value.
const char* const proclaim_source = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[4], 'term', ARGV[2], 'value', ARGV[3], 'grant', ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
return 1
)lua";

// KEYS: {lock, fence, owners, leader}; ARGV: term.
const char* const withdraw_source = R"lua(
if redis.call('HGET', KEYS[4], 'term') == ARGV[1] then redis.call('DEL', KEYS[4]) end
return 1
)lua";

// KEYS: {lock, fence, owners, leader}. Returns {term, value}, or an empty array.
const char* const leader_source = R"lua(
local record = redis.call('HMGET', KEYS[4], 'term', 'value', 'grant')
if not record[1] or redis.call('GET', KEYS[1]) ~= record[3] then return {} end
return {record[1], record[2]}
)lua";

const script& stored(const char* source) {
  // Never destroyed, as scripts.cpp's: a provider's last work may run after main() returned.
  return *new script{source, naming::sha1_hex(source)};
}

class redis_election_board final : public election_board {
 public:
  /// `inline_scripts`: run the scripts on the caller's thread (one fixed server), else on the
  /// network thread (Sentinel's master, a Cluster's slot).
  redis_election_board(std::shared_ptr<redis_backend> backend, bool inline_scripts)
      : backend_(std::move(backend)), inline_scripts_(inline_scripts) {}

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    static const script& proclaim_script = stored(proclaim_source);
    const held_grant& grant = dynamic_cast<const redis_lease&>(leadership).grant();
    const reply answer =
        run(proclaim_script, election,
            {grant.token, std::to_string(leadership.fencing_token()), std::string(value)});
    if (leadership.lost() || answer.type != reply::kind::integer || answer.integer != 1) {
      throw lock_lost_error(said("the lead of term " +
                                     std::to_string(leadership.fencing_token()) +
                                     " is over; proclaim refused",
                                 election));
    }
  }

  void withdraw(std::string_view election, const lease& leadership) override {
    static const script& withdraw_script = stored(withdraw_source);
    run(withdraw_script, election, {std::to_string(leadership.fencing_token())});
  }

  std::optional<leader_info> leader(std::string_view election) override {
    static const script& leader_script = stored(leader_source);
    const reply answer = run(leader_script, election, {});
    if (answer.type != reply::kind::array || answer.elements.size() != 2) return std::nullopt;
    return leader_info{answer.elements[1].text, std::stoull(answer.elements[0].text)};
  }

 private:
  std::string said(const std::string& what, std::string_view election) const {
    return backend_->message(what + " for election '" + naming::quote_for_message(election) +
                             "'");
  }

  reply run(const script& which, std::string_view election,
            const std::vector<std::string>& arguments) {
    acquire_request request;
    request.kind = primitive::election;
    request.name = std::string(election);
    const key_set keys = backend_->keys_for(request);
    const command_result result = inline_scripts_
                                      ? backend_->nodes().eval_here(which, keys, arguments)
                                      : on_network_thread(which, keys, arguments, election);
    if (result.failure) {
      throw connection_error(said(backend_->nodes().failures({result}), election));
    }
    if (result.value.is_error()) {
      throw dlock::error(said("the server refused the election script: " + result.value.text,
                              election));
    }
    return result.value;
  }

  command_result on_network_thread(const script& which, const key_set& keys,
                                   const std::vector<std::string>& arguments,
                                   std::string_view election) {
    return call_and_wait<command_result>(
        backend_->network_executor(), backend_->settings().release_timeout,
        said("no answer to the election script", election),
        [this, which = &which, keys, arguments](const blocking_reply<command_result>& reply) {
          backend_->nodes().eval_everywhere(
              *which, keys, arguments, {1, confirmed},
              [reply](std::vector<command_result> results) {
                reply.set_value(std::move(results.at(0)));
              });
        });
  }

  std::shared_ptr<redis_backend> backend_;
  bool inline_scripts_;
};

}  // namespace

std::shared_ptr<election_board> redis_backend::elections() {
  // One voting node: RedLock would need a majority's record (not yet).
  if (nodes_->size() != 1 || options_.plain_keys) return nullptr;
  return std::make_shared<redis_election_board>(shared_from_this(), on_callers_thread());
}

}  // namespace dlock::redis::detail
