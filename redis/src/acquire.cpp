#include "acquire.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <optional>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/errors.hpp>

#include "acquire_answer.hpp"
#include "acquire_machine.hpp"
#include "backend.hpp"
#include "duration_text.hpp"
#include "scripts.hpp"
#include "token.hpp"
#include "try_tally.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::optional<std::uint64_t> parse_counter(const std::string& text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

/// A fencing counter read that a node answered: no counter yet, or a number.
bool counter_read(const command_result& r) {
  return confirmed(r) && (r.value.type == reply::kind::nil ||
                          (r.value.type == reply::kind::string && parse_counter(r.value.text)));
}

bool granted_here(const command_result& r) {
  return read_acquire_answer(r).outcome == acquire_answer::kind::granted;
}

acquire_machine::shape shape_of(const redis_backend& backend, const acquire_request& request,
                                const key_set& keys, const node_set& nodes) {
  const bool queues = request.wait && (keys.kind == key_kind::write ||
                                       keys.kind == key_kind::dotnet_write || !keys.queue.empty());
  return {.waits = request.wait,
          .multi_node = nodes.size() > 1,
          .queues = queues,
          .confirms_with_replicas = backend.settings().sentinel.wait_replicas > 0,
          .expiry = backend.settings().expiry};
}

// Performs what the acquire's machine asks for (acquire_machine.hpp) and feeds it what the
// servers and the timers answer. Everything runs on the backend's network thread.
class redis_acquire final : public acquire_operation,
                            public channel_listener,
                            public std::enable_shared_from_this<redis_acquire> {
 public:
  redis_acquire(std::shared_ptr<redis_backend> backend, acquire_request request,
                acquire_completion done)
      : backend_(std::move(backend)),
        nodes_(backend_->nodes()),
        request_(std::move(request)),
        done_(std::move(done)),
        keys_(backend_->keys_for(request_)),
        token_(random_token()),
        machine_(shape_of(*backend_, request_, keys_, nodes_)),
        wait_timer_(backend_->network_executor()),
        give_up_timer_(backend_->network_executor()) {}

  void start() {
    boost::asio::post(backend_->network_executor(), [self = shared_from_this()] {
      self->perform(self->machine_.start(clock::now()));
    });
  }

  void cancel() noexcept override {
    boost::asio::post(backend_->network_executor(), [self = shared_from_this()] {
      self->feed(event::withdraw);
    });
  }

  void on_channel_event(channel_event e) override {
    feed(e == channel_event::lost ? event::channel_lost : event::channel_released);
  }

  void on_channel_message(const std::string& text) override {
    // A queue's release names the waiter whose turn it is: the others sleep on.
    if (!keys_.queue.empty() && text != token_ && text != "released") return;
    on_channel_event(channel_event::released);
  }

 private:
  using event = acquire_machine::event;
  using action = acquire_machine::action;

  void feed(event e) { perform(machine_.on(e, clock::now())); }

  // Answers come through the executor, never inside the call that sent their command (a
  // connection posts even a failure it knows at once): a list is performed whole before the
  // next event is fed. The machine puts a sending action last all the same.
  void perform(const acquire_machine::actions& actions) {
    for (const auto a : actions) {
      switch (a) {
        case action::watch_contact: watch_contact(); break;
        case action::read_counters: read_counters(); break;
        case action::send_try: send_try(); break;
        case action::confirm_with_replicas: confirm_with_replicas(); break;
        case action::give_back_try: give_back_try(node_set::queue_place::leave); break;
        case action::give_back_keeping_place: give_back_try(node_set::queue_place::keep); break;
        case action::report_waiting: backend_->events().acquire_waiting(); break;
        case action::listen:
          for (std::size_t i = 0; i < nodes_.size(); ++i) {
            nodes_.listen(i, keys_.channel, shared_from_this());
          }
          break;
        case action::arm_retry: wait_for(retry_delay()); break;
        case action::arm_outage_retry:
          wait_for(std::min<std::chrono::nanoseconds>(milliseconds(100),
                                                      backend_->settings().command_timeout));
          break;
        case action::cancel_retry: wait_timer_.cancel(); break;
        case action::stop_waiting: stop_waiting(); break;
        case action::withdraw:
          nodes_.withdraw(keys_, token_, [self = shared_from_this()](std::vector<command_result>) {
            self->feed(event::withdrawal_confirmed);
          });
          break;
        case action::withdraw_behind: nodes_.withdraw(keys_, token_, {}); break;
        case action::report_granted:
          complete(nullptr, backend_->grant(request_.name, keys_, token_, grant_valid_until_,
                                            last_try_.fencing_token()));
          break;
        case action::report_declined: complete(nullptr, nullptr); break;
        case action::report_failed: complete(failure_, nullptr); break;
      }
    }
  }

  // RedLock's fencing token, in two phases: read the counters on a majority and propose one
  // above the highest; a node grants only if its counter is below the proposal.
  void read_counters() {
    nodes_.command_everywhere({"GET", keys_.keys[1]}, {nodes_.majority(), counter_read},
                              [self = shared_from_this()](std::vector<command_result> results) {
      std::uint64_t highest = 0;
      std::size_t answered = 0;
      for (auto& r : results) {
        if (r.failure || r.value.is_error()) continue;
        if (r.value.type == reply::kind::string) {
          // A counter changed behind dlock's back is that node's error, not a throw on the
          // network thread (which would leave the acquire unanswered).
          const auto counter = parse_counter(r.value.text);
          if (!counter) {
            r.failure = "fencing counter " + self->keys_.keys[1] + " holds no number";
            continue;
          }
          highest = std::max(highest, *counter);
        }
        ++answered;
      }
      if (answered < self->nodes_.majority()) {
        self->unreachable(self->nodes_.failures(results));
        self->feed(event::counters_unreachable);
        return;
      }
      self->proposal_ = highest + 1;
      self->feed(event::counters_read);
    });
  }

  void send_try() {
    // The last give-back's retries must not follow this try, which has the same token.
    if (given_back_) *std::exchange(given_back_, nullptr) = true;
    const auto sent = clock::now();
    if (machine_.queued() && nodes_.size() > 1 && arrival_.empty()) {
      // RedLock: every server queues this waiter at the same place, by its own clock's
      // arrival (ties by token), so that their queues agree on who is first; one server's
      // queue orders by its clock.
      arrival_ = std::to_string(std::chrono::duration_cast<milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
    }
    nodes_.eval_everywhere(
        acquire_script(), keys_,
        {token_, milliseconds_argument(backend_->settings().expiry),
         std::string(script_argument(keys_.kind)), std::to_string(proposal_),
         std::to_string(request_.max_count), machine_.queued() ? "1" : "0",
         backend_->epoch_key(), request_.owner, keys_.queue, arrival_,
         milliseconds_argument(request_.min_hold), keys_.hold},
        {nodes_.quorum(keys_.kind), granted_here},
        [self = shared_from_this(), sent](std::vector<command_result> results) {
          self->settle(results, sent);
        });
  }

  void settle(const std::vector<command_result>& results, clock::time_point sent) {
    last_try_ = try_tally(proposal_);
    for (const auto& r : results) last_try_.count(read_acquire_answer(r), !r.failure);
    grant_valid_until_ = valid_until(sent, backend_->settings().expiry);
    switch (last_try_.outcome(nodes_.quorum(keys_.kind), clock::now() < grant_valid_until_)) {
      case try_tally::verdict::granted:
        return feed(event::try_granted);
      case try_tally::verdict::taken:
        return feed(event::try_taken);
      case try_tally::verdict::unreachable:
        unreachable(last_try_.odd_reply().empty() ? nodes_.failures(results)
                                                  : last_try_.odd_reply());
        return feed(event::try_unreachable);
      case try_tally::verdict::wrong_type:
        failure_ = std::make_exception_ptr(
            backend_->key_clash(request_, keys_, last_try_.wrong_type_reply()));
        return feed(event::try_refused);
      case try_tally::verdict::other_max_count:
        failure_ = std::make_exception_ptr(
            backend_->max_count_mismatch(request_, last_try_.other_max_count()));
        return feed(event::try_refused);
    }
  }

  // With Sentinel's wait_replicas: the grant counts once enough replicas have it (WAIT, on
  // the connection that made it, so it waits for that write), else it is given back. Without
  // them a failover could promote a replica that never saw it.
  void confirm_with_replicas() {
    const auto& sentinel = backend_->settings().sentinel;
    const auto timeout = std::chrono::duration_cast<milliseconds>(sentinel.wait_timeout);
    nodes_.at(0).command(
        {"WAIT", std::to_string(sentinel.wait_replicas), std::to_string(timeout.count())},
        [self = shared_from_this()](command_result result) {
          const auto& wanted = self->backend_->settings().sentinel;
          const bool acknowledged = !result.failure && result.value.type == reply::kind::integer &&
                                    result.value.integer >= wanted.wait_replicas;
          if (acknowledged && clock::now() < self->grant_valid_until_) {
            return self->feed(event::replicas_acknowledged);
          }
          std::string why = "the grant was given back: ";
          if (result.failure || result.value.is_error()) {
            why += "WAIT failed: " + (result.failure ? *result.failure : result.value.text);
          } else if (!acknowledged) {
            why += std::to_string(result.value.integer) + " of " +
                   std::to_string(wanted.wait_replicas) +
                   " replicas (wait_replicas) acknowledged it within " +
                   milliseconds_text(wanted.wait_timeout) + " (wait_timeout)";
          } else {
            why += "the replicas acknowledged it after its lease ran out";
          }
          self->failure_ = std::make_exception_ptr(
              connection_error(self->backend_->message(why, self->request_.name)));
          self->feed(event::replicas_missing);
        });
  }

  // A try that did not win hands back at once what it may hold (a RedLock minority of grants,
  // or a grant whose reply was lost), so that the next try, ours or another's, can win.
  void give_back_try(node_set::queue_place place) {
    if (!last_try_.may_hold()) return;
    given_back_ = std::make_shared<bool>(false);
    nodes_.give_back(keys_, token_, place, given_back_);
  }

  /// Until the next try, when nothing wakes the waiter sooner.
  milliseconds retry_delay() const {
    // Another contender's proposal got there first, and it may have failed as well: the lock
    // may be free, so try again soon (a few ms, spread) rather than wait for a message.
    milliseconds delay =
        last_try_.outbid() ? milliseconds(1 + static_cast<int>(random_token()[0] % 8))
                           : last_try_.wait_hint().value_or(std::chrono::duration_cast<milliseconds>(
                                 backend_->settings().expiry));
    // A foreign holder's release publishes nothing: look again soon rather than at its expiry.
    if (keys_.foreign_holders) delay = std::min(delay, foreign_release_poll);
    // A queued waiter refreshes its place in the queue before it would expire.
    if (machine_.queued()) {
      delay = std::min(delay, std::chrono::duration_cast<milliseconds>(
                                  backend_->settings().extend_every));
    }
    return std::max(delay, milliseconds(1));
  }

  void wait_for(std::chrono::nanoseconds delay) {
    wait_timer_.expires_after(delay);
    wait_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error) self->feed(event::retry_timer);
    });
  }

  /// Keeps `why` for a report_failed the machine may ask for, and for servers_silent's message.
  void unreachable(const std::string& why) {
    last_failure_ = why;
    failure_ = std::make_exception_ptr(connection_error(backend_->message(why, request_.name)));
  }

  // The latest time a quorum of the servers was heard from: a try they answered, or (while
  // listening) their subscriber connections, which answer a heartbeat every expiry / 3.
  clock::time_point contact() const {
    clock::time_point latest = machine_.heard_at();
    if (!machine_.listening()) return latest;
    std::vector<clock::time_point> heard;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      heard.push_back(nodes_.subscriber_heard_at(i, keys_.channel));
    }
    const std::size_t need = nodes_.quorum(keys_.kind);
    std::nth_element(heard.begin(), heard.begin() + static_cast<std::ptrdiff_t>(need - 1),
                     heard.end(), std::greater<>());
    return std::max(latest, heard[need - 1]);
  }

  // The waiter's bound under a partition: a waiting acquire that has heard nothing from a
  // quorum of its servers for one expiry fails with connection_error, whatever it is doing
  // (waiting for a message, or a try in flight to a silent server: what that try may still
  // win is given back). So it fails at most one expiry after the servers fell silent.
  void watch_contact() {
    give_up_timer_.expires_at(contact() + backend_->settings().expiry);
    give_up_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error || self->machine_.finished()) return;
      if (clock::now() < self->contact() + self->backend_->settings().expiry) {
        self->watch_contact();
        return;
      }
      std::string why = "no answer from " +
                        std::string(self->nodes_.size() > 1 ? "a majority of the servers"
                                                            : "the server") +
                        " for " + milliseconds_text(self->backend_->settings().expiry) +
                        " (one expiry)";
      if (!self->last_failure_.empty()) why += "; last failure: " + self->last_failure_;
      self->failure_ = std::make_exception_ptr(
          connection_error(self->backend_->message(why, self->request_.name)));
      self->feed(event::servers_silent);
    });
  }

  void stop_waiting() {
    wait_timer_.cancel();
    give_up_timer_.cancel();
    // On every node, whatever listening() says: after one RedLock node's subscription was lost,
    // the others still hold this operation (a no-op where it is absent).
    for (std::size_t i = 0; i < nodes_.size(); ++i) nodes_.unlisten(i, keys_.channel, this);
  }

  void complete(std::exception_ptr error, std::unique_ptr<lease> granted) {
    auto done = std::move(done_);
    done(std::move(error), std::move(granted));
  }

  std::shared_ptr<redis_backend> backend_;
  node_set& nodes_;  ///< the backend's, alive as long as backend_
  acquire_request request_;
  acquire_completion done_;
  key_set keys_;
  std::string token_;
  // Set (superseded) when the next try is sent: the retries of the last give-back stop. Both
  // run on the network thread.
  std::shared_ptr<bool> given_back_;
  acquire_machine machine_;
  /// RedLock: when this waiter first queued, ms since the epoch by this host's clock.
  std::string arrival_;
  /// RedLock's fencing proposal for the next try; 0 on one server.
  std::uint64_t proposal_ = 0;
  try_tally last_try_{0};
  clock::time_point grant_valid_until_{};
  /// What report_failed reports: set with the event that may fail the acquire.
  std::exception_ptr failure_;
  std::string last_failure_;
  boost::asio::steady_timer wait_timer_;
  boost::asio::steady_timer give_up_timer_;
};

}  // namespace

std::shared_ptr<acquire_operation> start_acquire_on_network_thread(
    std::shared_ptr<redis_backend> backend, acquire_request request, acquire_completion done) {
  auto op = std::make_shared<redis_acquire>(std::move(backend), std::move(request),
                                            std::move(done));
  op->start();
  return op;
}

}  // namespace dlock::redis::detail
