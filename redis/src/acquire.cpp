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
#include "backend.hpp"
#include "duration_text.hpp"
#include "scripts.hpp"
#include "token.hpp"

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
        wait_timer_(backend_->network_executor()),
        give_up_timer_(backend_->network_executor()) {}

  void start() {
    boost::asio::post(backend_->network_executor(), [self = shared_from_this()] {
      self->heard_at_ = clock::now();
      if (self->request_.wait) self->watch_contact();
      self->attempt();
    });
  }

  void cancel() noexcept override {
    boost::asio::post(backend_->network_executor(), [self = shared_from_this()] {
      if (self->phase_ == phase::finished || self->withdrawing_) return;
      self->withdrawing_ = true;
      // A try in flight may still queue this waiter at the server: its withdrawal must run
      // behind it. A reply can come long after the withdrawal would have been sent (a NOSCRIPT
      // answered by sending the script, a cluster's redirection), so the withdrawal waits for
      // the try's answer (settle() and the counter read's and WAIT's handlers).
      if (self->phase_ != phase::trying) self->finish(nullptr, nullptr);
    });
  }

  void on_channel_event(channel_event event) override {
    if (phase_ == phase::finished) return;
    // Listen again (on every node: listening where already listening is a no-op).
    if (event == channel_event::lost) listening_ = false;
    if (phase_ == phase::trying) {
      retry_at_once_ = true;  // the try in flight may have seen the holder that just left
      return;
    }
    wait_timer_.cancel();
    attempt();
  }

  void on_channel_message(const std::string& text) override {
    // A queue's release names the waiter whose turn it is: the others sleep on.
    if (!keys_.queue.empty() && text != token_ && text != "released") return;
    on_channel_event(channel_event::released);
  }

 private:
  /// Where the operation is. A try's answer that comes after `finished` (it gave up on its
  /// servers meanwhile) is only given back.
  enum class phase {
    starting,  ///< posted, no try made yet
    trying,    ///< a try is in flight (with RedLock: the counter read, then the proposal)
    waiting,   ///< between tries: for a release message, the holder's lease, or a retry
    finished,  ///< done_ has run
  };

  bool multi_node() const { return nodes_.size() > 1; }

  void attempt() {
    if (phase_ == phase::finished) return;
    phase_ = phase::trying;
    retry_at_once_ = false;
    ++attempts_;
    if (!multi_node()) {
      propose(0);
      return;
    }
    // RedLock's fencing token, in two phases: read the counters on a majority and propose
    // one above the highest; a node grants only if its counter is below the proposal.
    fence_key_ = keys_.keys[1];
    nodes_.command_everywhere({"GET", fence_key_}, {nodes_.majority(), counter_read},
                              [self = shared_from_this()](std::vector<command_result> results) {
      if (self->phase_ == phase::finished) return;
      if (self->withdrawing_) {  // withdrawn meanwhile: propose nothing
        self->finish(nullptr, nullptr);
        return;
      }
      std::uint64_t highest = 0;
      std::size_t answered = 0;
      for (auto& r : results) {
        if (r.failure || r.value.is_error()) continue;
        if (r.value.type == reply::kind::string) {
          // A counter changed behind dlock's back is that node's error, not a throw on the
          // network thread (which would leave the acquire unanswered).
          const auto counter = parse_counter(r.value.text);
          if (!counter) {
            r.failure = "fencing counter " + self->fence_key_ + " holds no number";
            continue;
          }
          highest = std::max(highest, *counter);
        }
        ++answered;
      }
      if (answered < self->nodes_.majority()) {
        self->attempt_failed(self->nodes_.failures(results));
        return;
      }
      self->propose(highest + 1);
    });
  }

  void propose(std::uint64_t proposal) {
    const auto sent = clock::now();
    const bool queue = request_.wait && (keys_.kind == key_kind::write ||
                                         keys_.kind == key_kind::dotnet_write ||
                                         !keys_.queue.empty());
    if (queue) queued_ = true;
    if (queue && multi_node() && arrival_.empty()) {
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
         std::string(script_argument(keys_.kind)), std::to_string(proposal),
         std::to_string(request_.max_count), queue ? "1" : "0",
         backend_->epoch_key(), request_.owner, keys_.queue, arrival_},
        {nodes_.quorum(keys_.kind), granted_here},
        [self = shared_from_this(), sent, proposal](std::vector<command_result> results) {
          self->settle(std::move(results), sent, proposal);
        });
  }

  void settle(std::vector<command_result> results, clock::time_point sent,
              std::uint64_t proposal) {
    std::size_t granted = 0, answered = 0;
    std::uint64_t fencing_token = proposal;
    std::optional<std::chrono::milliseconds> wait_hint;
    std::optional<long long> other_max_count;
    std::optional<std::string> wrong_type;
    std::string odd_reply;
    bool outbid = false;
    for (const auto& r : results) {
      const acquire_answer answer = read_acquire_answer(r);
      if (answer.outcome == acquire_answer::kind::failed) {
        if (!r.failure) odd_reply = answer.failure;
        continue;
      }
      ++answered;
      if (answer.outcome == acquire_answer::kind::granted) {
        ++granted;
        if (proposal == 0) fencing_token = static_cast<std::uint64_t>(answer.value);
      } else if (answer.outcome == acquire_answer::kind::wrong_type) {
        wrong_type = answer.failure;
      } else if (answer.outcome == acquire_answer::kind::other_max_count) {
        other_max_count = answer.value;
      } else if (answer.outcome == acquire_answer::kind::stale) {
        outbid = true;
      } else if (answer.outcome == acquire_answer::kind::taken && answer.value >= 0) {
        const milliseconds hint{answer.value};
        if (!wait_hint || hint < *wait_hint) wait_hint = hint;
      }
    }
    if (phase_ == phase::finished || withdrawing_) {  // ended while this try was in flight
      give_back(results, granted);
      if (phase_ != phase::finished) finish(nullptr, nullptr);
      return;
    }
    if (wrong_type) {
      give_back(results, granted);
      finish(std::make_exception_ptr(backend_->key_clash(request_, keys_, *wrong_type)), nullptr);
      return;
    }
    if (other_max_count) {
      give_back(results, granted);
      finish(std::make_exception_ptr(backend_->max_count_mismatch(request_, *other_max_count)),
             nullptr);
      return;
    }
    const auto deadline = valid_until(sent, backend_->settings().expiry);
    if (granted >= nodes_.quorum(keys_.kind) && clock::now() < deadline) {
      if (backend_->settings().sentinel.wait_replicas > 0) {
        wait_for_replicas(deadline, fencing_token);
      } else {
        grant(deadline, fencing_token);
      }
      return;
    }
    // A RedLock waiter keeps its place in the queues: its minority is given back, its turn
    // is not over (a grant on a server requires being its head, so no one passes it there).
    give_back(results, granted,
              queued_ && multi_node() ? node_set::queue_place::keep : node_set::queue_place::leave);
    if (answered < nodes_.quorum(keys_.kind)) {
      attempt_failed(odd_reply.empty() ? nodes_.failures(results) : odd_reply);
      return;
    }
    trouble_since_.reset();
    heard_at_ = clock::now();
    if (outbid) {
      // Another contender's proposal got there first, and it may have failed as well: the
      // lock may be free, so try again soon (a few ms, spread) rather than wait for a message.
      wait_hint = milliseconds(1 + static_cast<int>(random_token()[0] % 8));
    }
    not_granted(wait_hint.value_or(std::chrono::duration_cast<milliseconds>(
        backend_->settings().expiry)));
  }

  void grant(clock::time_point valid_until, std::uint64_t fencing_token) {
    auto granted = backend_->grant(request_.name, keys_, token_, valid_until, fencing_token);
    // One server: a granted waiter left the queue in the same script. RedLock: it keeps its
    // place (the grant may have been a minority there) until its release leaves every queue.
    queued_ = false;
    finish(nullptr, std::move(granted));
  }

  // With Sentinel's wait_replicas: the grant counts once enough replicas have it (WAIT, on
  // the connection that made it, so it waits for that write), else it is given back. Without
  // them a failover could promote a replica that never saw it.
  void wait_for_replicas(clock::time_point valid_until, std::uint64_t fencing_token) {
    const auto& sentinel = backend_->settings().sentinel;
    const auto timeout = std::chrono::duration_cast<milliseconds>(sentinel.wait_timeout);
    nodes_.at(0).command(
        {"WAIT", std::to_string(sentinel.wait_replicas), std::to_string(timeout.count())},
        [self = shared_from_this(), valid_until, fencing_token](command_result result) {
          const auto& wanted = self->backend_->settings().sentinel;
          const bool acknowledged = !result.failure && result.value.type == reply::kind::integer &&
                                    result.value.integer >= wanted.wait_replicas;
          if (self->phase_ == phase::finished || self->withdrawing_ || !acknowledged ||
              clock::now() >= valid_until) {
            self->nodes_.give_back(self->keys_, self->token_);
          }
          if (self->phase_ == phase::finished) return;
          if (self->withdrawing_) {
            self->finish(nullptr, nullptr);
            return;
          }
          if (acknowledged && clock::now() < valid_until) {
            self->grant(valid_until, fencing_token);
            return;
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
          self->finish(std::make_exception_ptr(
                           connection_error(self->backend_->message(why, self->request_.name))),
                       nullptr);
        });
  }

  // A try that did not win hands back at once what it may hold (a RedLock minority of grants,
  // or a grant whose reply was lost), so that the next try, ours or another's, can win.
  void give_back(const std::vector<command_result>& results, std::size_t granted,
                 node_set::queue_place place = node_set::queue_place::leave) {
    const bool unanswered =
        std::any_of(results.begin(), results.end(), [](const auto& r) { return r.failure; });
    if (granted > 0 || unanswered) nodes_.give_back(keys_, token_, place);
  }

  void not_granted(milliseconds wait_hint) {
    phase_ = phase::waiting;
    if (!request_.wait) {
      finish(nullptr, nullptr);
      return;
    }
    if (!reported_waiting_) {
      reported_waiting_ = true;
      backend_->events().acquire_waiting();
    }
    if (retry_at_once_) {
      attempt();
      return;
    }
    if (!listening_) {
      // The next try runs when the subscription is confirmed.
      listening_ = true;
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        nodes_.listen(i, keys_.channel, shared_from_this());
      }
    }
    // A foreign holder's release publishes nothing: look again soon rather than at its expiry.
    if (keys_.foreign_holders) wait_hint = std::min(wait_hint, foreign_release_poll);
    // A queued waiter refreshes its place in the queue before it would expire.
    if (queued_) {
      wait_hint = std::min(wait_hint, std::chrono::duration_cast<milliseconds>(
                                          backend_->settings().extend_every));
    }
    wait_for(std::max(wait_hint, milliseconds(1)));
  }

  void wait_for(std::chrono::nanoseconds delay) {
    wait_timer_.expires_after(delay);
    wait_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error && self->phase_ == phase::waiting) self->attempt();
    });
  }

  // A waiting acquire rides out a short outage (a restart, a killed connection) and retries;
  // the first attempt, and one that has failed for a whole expiry, report it (and so does
  // watch_contact(), once nothing was heard for an expiry).
  void attempt_failed(const std::string& why) {
    phase_ = phase::waiting;
    last_failure_ = why;
    const auto now = clock::now();
    if (!trouble_since_) trouble_since_ = now;
    if (request_.wait && attempts_ > 1 && now - *trouble_since_ < backend_->settings().expiry) {
      wait_for(std::min<std::chrono::nanoseconds>(milliseconds(100),
                                                  backend_->settings().command_timeout));
      return;
    }
    finish(std::make_exception_ptr(connection_error(backend_->message(why, request_.name))),
           nullptr);
  }

  // The latest time a quorum of the servers was heard from: a try they answered, or (while
  // listening) their subscriber connections, which answer a heartbeat every expiry / 3.
  clock::time_point contact() const {
    clock::time_point latest = heard_at_;
    if (!listening_) return latest;
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
      if (error || self->phase_ == phase::finished) return;
      if (clock::now() < self->contact() + self->backend_->settings().expiry) {
        self->watch_contact();
        return;
      }
      std::string why = "no answer from " +
                        std::string(self->multi_node() ? "a majority of the servers" : "the server") +
                        " for " + milliseconds_text(self->backend_->settings().expiry) +
                        " (one expiry)";
      if (!self->last_failure_.empty()) why += "; last failure: " + self->last_failure_;
      self->finish(std::make_exception_ptr(
                       connection_error(self->backend_->message(why, self->request_.name))),
                   nullptr);
    });
  }

  void finish(std::exception_ptr error, std::unique_ptr<lease> granted) {
    if (phase_ == phase::finished) return;
    phase_ = phase::finished;
    wait_timer_.cancel();
    give_up_timer_.cancel();
    // On every node, whatever listening_ says: after one RedLock node's subscription was lost
    // (listening_ reset), the others still hold this operation (a no-op where it is absent).
    for (std::size_t i = 0; i < nodes_.size(); ++i) nodes_.unlisten(i, keys_.channel, this);
    if (queued_ && !granted) {
      // A failure knows its verdict: the servers could not be heard, and would not confirm a
      // withdrawal either. It goes out behind (and is retried); the caller hears now.
      if (error) {
        nodes_.withdraw(keys_, token_, {});
      } else {
        return withdraw_then_complete();
      }
    }
    auto done = std::move(done_);
    done(std::move(error), std::move(granted));
  }

  // Leaves the queue, so readers held back by it, or the next waiter, may go on, and completes
  // once the servers confirm (a silent one is retried behind, until the place would have
  // expired). Completed at once, a caller that then ends its provider or its process (dlock on
  // a signal) could take the connection down before the withdrawal is sent: its place stayed
  // at the head of the queue until the place's deadline, and the lock went to nobody meanwhile.
  // Core answers a stopped caller within its grace all the same.
  void withdraw_then_complete() {
    nodes_.withdraw(keys_, token_, [self = shared_from_this()](std::vector<command_result>) {
      auto done = std::move(self->done_);
      done(nullptr, nullptr);
    });
  }

  std::shared_ptr<redis_backend> backend_;
  node_set& nodes_;  ///< the backend's, alive as long as backend_
  acquire_request request_;
  acquire_completion done_;
  key_set keys_;
  std::string token_;
  std::string fence_key_;
  /// RedLock: when this waiter first queued, ms since the epoch by this host's clock.
  std::string arrival_;
  boost::asio::steady_timer wait_timer_;
  boost::asio::steady_timer give_up_timer_;
  /// When a quorum last answered a try (or the acquire began); see contact().
  clock::time_point heard_at_{};
  std::string last_failure_;
  phase phase_ = phase::starting;
  bool retry_at_once_ = false;    ///< a channel event came during the try: try again at once
  bool listening_ = false;        ///< subscribed (or subscribing) to the release channel
  bool queued_ = false;           ///< in a queue on the servers (writers', waiters'): withdraw on failure
  bool withdrawing_ = false;      ///< cancel() came: end once the try in flight answered
  bool reported_waiting_ = false;
  int attempts_ = 0;
  std::optional<clock::time_point> trouble_since_;
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
