#include "backend.hpp"

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/naming.hpp>

#include "acquire.hpp"
#include "min_hold.hpp"
#include "option_checks.hpp"
#include "semaphore_count.hpp"

namespace dlock::zookeeper::detail {

namespace {

// Longer escaped names are cut and end in a hash (naming::escape_segment), as file names are:
// a node path stays readable, and well inside what a client's request buffer takes.
constexpr std::size_t max_escaped_bytes = 200;

const options& validated(const options& opts) {
  validate(opts);
  return opts;
}

}  // namespace

zookeeper_backend::zookeeper_backend(options opts)
    : options_(validated(opts)),
      session_(std::make_shared<zk_session>(*this, options_, acl_entries_of(options_.acl),
                                            executor(), [this] { held_->mark_all_lost(); })),
      held_(std::make_shared<held_watch>(session_, executor())) {}

zookeeper_backend::~zookeeper_backend() {
  // The io thread first: the single-threaded client must not be closed while it drives it.
  io().stop();
  session_->close();
}

std::string zookeeper_backend::node_of(std::string_view name) const {
  return options_.base_path + "/" + naming::escape_segment(name, max_escaped_bytes, false);
}

void zookeeper_backend::start() { session_->open_and_wait(); }

std::shared_ptr<acquire_operation> zookeeper_backend::start_acquire(acquire_request request,
                                                                    acquire_completion done) {
  return zookeeper_acquire::launch(shared_from_this(), std::move(request), std::move(done));
}

provider_health zookeeper_backend::health() const {
  provider_health health;
  const auto since = session_ ? session_->disconnected_since() : std::nullopt;
  if (!since) return health;
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto outage = duration_cast<milliseconds>(std::chrono::steady_clock::now() - *since);
  health.connected = false;
  health.problems.push_back(message(
      "no server of the ensemble reached for " + std::to_string(outage.count()) +
      " ms (the session expires after " +
      std::to_string(duration_cast<milliseconds>(options_.session_timeout).count()) +
      " ms without one)"));
  return health;
}

std::vector<zk_reply> zookeeper_backend::ask(const call_sender& send,
                                             const std::string& no_answer) const {
  std::vector<blocking_reply<zk_reply>> answers;
  send([&answers] {
    blocking_reply<zk_reply> answer;
    answers.push_back(answer);
    return [answer](zk_reply reply) { answer.set_value(std::move(reply)); };
  });
  std::vector<zk_reply> replies;
  const bool all_came = session_->await(
      [&](std::chrono::nanoseconds wait) {
        while (replies.size() < answers.size()) {
          std::optional<zk_reply> reply = answers[replies.size()].get_within(wait);
          if (!reply) return false;
          replies.push_back(std::move(*reply));
          wait = std::chrono::nanoseconds::zero();
        }
        return true;
      },
      std::chrono::steady_clock::now() + options_.release_timeout);
  if (!all_came) throw connection_error(no_answer);
  return replies;
}

std::string zookeeper_backend::min_hold_refusal() const {
  std::lock_guard lock(ttl_answer_mutex_);
  if (!ttl_refusal_) ttl_refusal_ = ask_for_ttl_nodes(*this);
  return *ttl_refusal_;
}

std::optional<std::uint32_t> zookeeper_backend::current_count(const acquire_request& request) {
  if (running_in_this_thread()) return std::nullopt;  // cannot wait for its own answers
  return count_free_slots(*this, request);
}

}  // namespace dlock::zookeeper::detail
