#include "redis_backend.hpp"

#include <algorithm>
#include <charconv>
#include <future>
#include <random>
#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>
#include <dlock/core/backend/naming.hpp>

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

// Appended to a lock's key in plain-key mode, the key of its fencing counter.
constexpr const char* plain_fence_suffix = ":dlock-fence";

using std::chrono::milliseconds;

std::string milliseconds_argument(std::chrono::nanoseconds duration) {
  return std::to_string(std::chrono::duration_cast<milliseconds>(duration).count());
}

/// A name inside a hash tag: '%', '{' and '}' are written %25, %7B and %7D, so the first '}'
/// of a key always ends its tag and distinct names never share a key.
std::string escape_for_tag(std::string_view name) {
  std::string escaped;
  escaped.reserve(name.size());
  for (char c : name) {
    if (c == '%') {
      escaped += "%25";
    } else if (c == '{') {
      escaped += "%7B";
    } else if (c == '}') {
      escaped += "%7D";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

bool is_integer_pair(const reply& value) {
  return value.type == reply::kind::array && value.elements.size() == 2 &&
         value.elements[0].type == reply::kind::integer &&
         value.elements[1].type == reply::kind::integer;
}

std::chrono::nanoseconds positive_or(std::chrono::nanoseconds value,
                                     std::chrono::nanoseconds fallback) {
  return value > std::chrono::nanoseconds::zero() ? value : fallback;
}

options validated(options opts) {
  if (opts.servers.empty()) {
    throw std::invalid_argument("dlock: redis options: servers must name at least one server");
  }
  for (const auto& s : opts.servers) {
    if (s.host.empty()) throw std::invalid_argument("dlock: redis options: a server has no host");
    if (s.port == 0) {
      throw std::invalid_argument("dlock: redis options: server '" + s.host + "' has port 0");
    }
  }
  if (opts.expiry < milliseconds(10)) {
    throw std::invalid_argument("dlock: redis options: expiry must be at least 10ms");
  }
  if (opts.extend_every < std::chrono::nanoseconds::zero() || opts.extend_every >= opts.expiry) {
    throw std::invalid_argument(
        "dlock: redis options: extend_every must be positive and below the expiry");
  }
  if (opts.command_timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: redis options: command_timeout must not be negative");
  }
  if (opts.client_name.empty() ||
      opts.client_name.find_first_of(" \t\r\n") != std::string::npos) {
    throw std::invalid_argument(
        "dlock: redis options: client_name must be a non-empty word without spaces");
  }
  if (opts.database < 0) {
    throw std::invalid_argument("dlock: redis options: database must not be negative");
  }
  opts.extend_every = positive_or(opts.extend_every, opts.expiry / 3);
  opts.command_timeout =
      positive_or(opts.command_timeout, std::min<std::chrono::nanoseconds>(opts.expiry / 3,
                                                                            std::chrono::seconds(5)));
  return opts;
}

/// Counts the answers of a fan-out until every node has answered.
struct fan_out {
  explicit fan_out(std::size_t nodes, fan_out_handler done)
      : results(nodes), remaining(nodes), done(std::move(done)) {}
  std::vector<command_result> results;
  std::size_t remaining;
  fan_out_handler done;

  static reply_handler slot(const std::shared_ptr<fan_out>& all, std::size_t i) {
    return [all, i](command_result result) {
      all->results[i] = std::move(result);
      if (--all->remaining == 0) all->done(std::move(all->results));
    };
  }
};

std::vector<std::string> evalsha_command(const script& which, const key_set& keys,
                                         const std::vector<std::string>& arguments) {
  std::vector<std::string> command{"EVALSHA", which.sha1, std::to_string(keys.keys.size())};
  command.insert(command.end(), keys.keys.begin(), keys.keys.end());
  command.insert(command.end(), arguments.begin(), arguments.end());
  return command;
}

// After a restart or SCRIPT FLUSH the server no longer knows a script: it is sent whole.
bool script_unknown(const command_result& result) {
  return !result.failure && result.value.is_error() && result.value.text.starts_with("NOSCRIPT");
}

void send_whole_script(std::vector<std::string>& command, const script& which) {
  command[0] = "EVAL";
  command[1] = which.source;
}

}  // namespace

std::string random_token() {
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device();
  }()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string token;
  for (int word = 0; word < 2; ++word) {
    std::uint64_t bits = generator();
    for (int i = 0; i < 16; ++i, bits >>= 4) token.push_back(digits[bits & 15]);
  }
  return token;
}

acquire_answer read_acquire_answer(const command_result& result) {
  if (result.failure) return {.failure = *result.failure};
  if (!is_integer_pair(result.value)) {
    return {.failure = result.value.is_error() ? result.value.text
                                               : "unexpected reply to the acquire script"};
  }
  const long long status = result.value.elements[0].integer;
  const long long value = result.value.elements[1].integer;
  switch (status) {
    case 1: return {acquire_answer::kind::granted, value, {}};
    case 0: return {acquire_answer::kind::taken, value, {}};
    case -1: return {acquire_answer::kind::stale, value, {}};
    case -2: return {acquire_answer::kind::other_max_count, value, {}};
    default: return {.failure = "unexpected reply to the acquire script"};
  }
}

namespace {

std::optional<std::uint64_t> parse_counter(const std::string& text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// A grant, owned by the handle.

class redis_lease final : public dlock::lease {
 public:
  redis_lease(std::shared_ptr<redis_backend> backend, std::shared_ptr<held_grant> grant,
              std::uint64_t fencing_token)
      : lease(fencing_token), backend_(std::move(backend)), grant_(std::move(grant)) {
    // The watchdog marks the grant lost through this handle's own signal.
    grant_->lost = lost_signal();
  }
  ~redis_lease() override {
    if (released_) return;
    try {
      backend_->release(grant_, false);
    } catch (...) {
      backend_->events().background_error(std::current_exception());
    }
  }
  void release() override {
    released_ = true;
    backend_->release(grant_, true);
  }

 private:
  std::shared_ptr<redis_backend> backend_;
  std::shared_ptr<held_grant> grant_;
  bool released_ = false;
};

// ---------------------------------------------------------------------------------------------
// An acquire: try; on "taken", subscribe to the name's release channel, try again (a release
// between the first try and the subscription would otherwise go unheard), then wait for a
// message, bounded by the time the holder's lease has left. Runs on the network thread.

class redis_acquire final : public acquire_operation,
                            public channel_listener,
                            public std::enable_shared_from_this<redis_acquire> {
 public:
  redis_acquire(std::shared_ptr<redis_backend> backend, acquire_request request,
                acquire_completion done)
      : backend_(std::move(backend)),
        request_(std::move(request)),
        done_(std::move(done)),
        keys_(backend_->keys_for(request_)),
        token_(random_token()),
        wait_timer_(backend_->network_executor()) {}

  void start() {
    boost::asio::post(backend_->network_executor(), [self = shared_from_this()] { self->attempt(); });
  }

  void cancel() noexcept override {
    boost::asio::post(backend_->network_executor(), [self = shared_from_this()] {
      if (self->finished_) return;
      self->cancelled_ = true;
      // Now, not when the try in flight answers (up to a command timeout): settle() gives
      // back what that try may still win.
      self->finish(nullptr, nullptr);
    });
  }

  void on_channel_event(channel_event event) override {
    if (finished_) return;
    // Listen again (on every node: listening where already listening is a no-op).
    if (event == channel_event::lost) listening_ = false;
    if (attempting_) {
      again_ = true;  // the attempt in flight may have seen the holder that just left
      return;
    }
    wait_timer_.cancel();
    attempt();
  }

 private:
  bool multi_node() const { return backend_->node_count() > 1; }

  void attempt() {
    if (finished_) return;
    attempting_ = true;
    again_ = false;
    ++attempts_;
    if (!multi_node()) {
      propose(0);
      return;
    }
    // RedLock's fencing token, in two phases: read the counters on a majority and propose
    // one above the highest; a node grants only if its counter is below the proposal.
    fence_key_ = keys_.keys[1];
    backend_->command_everywhere({"GET", fence_key_}, [self = shared_from_this()](
                                                          std::vector<command_result> results) {
      if (self->finished_) return;  // stopped meanwhile: propose nothing
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
      if (answered < self->backend_->majority()) {
        self->attempt_failed(self->backend_->failures(results));
        return;
      }
      self->propose(highest + 1);
    });
  }

  void propose(std::uint64_t proposal) {
    const auto sent = clock::now();
    const bool queue = request_.wait && keys_.kind == "write";
    if (queue) queued_writer_ = true;
    backend_->eval_everywhere(
        acquire_script(), keys_,
        {token_, milliseconds_argument(backend_->settings().expiry), keys_.kind,
         std::to_string(proposal), std::to_string(request_.max_count), queue ? "1" : "0"},
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
      } else if (answer.outcome == acquire_answer::kind::other_max_count) {
        other_max_count = answer.value;
      } else if (answer.outcome == acquire_answer::kind::stale) {
        outbid = true;
      } else if (answer.outcome == acquire_answer::kind::taken && answer.value >= 0) {
        const milliseconds hint{answer.value};
        if (!wait_hint || hint < *wait_hint) wait_hint = hint;
      }
    }
    if (finished_) {  // stopped while this try was in flight
      give_back(results, granted);
      return;
    }
    if (other_max_count) {
      give_back(results, granted);
      finish(std::make_exception_ptr(backend_->max_count_mismatch(request_, *other_max_count)),
             nullptr);
      return;
    }
    const auto deadline = valid_until(sent, backend_->settings().expiry);
    if (granted >= backend_->quorum(keys_) && clock::now() < deadline) {
      grant(deadline, fencing_token);
      return;
    }
    give_back(results, granted);
    if (answered < backend_->quorum(keys_)) {
      attempt_failed(odd_reply.empty() ? backend_->failures(results) : odd_reply);
      return;
    }
    trouble_since_.reset();
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
    queued_writer_ = false;  // a granted writer left the queue in the same script
    finish(nullptr, std::move(granted));
  }

  // A try that did not win hands back at once what it may hold (a RedLock minority of grants,
  // or a grant whose reply was lost), so that the next try, ours or another's, can win.
  void give_back(const std::vector<command_result>& results, std::size_t granted) {
    const bool unanswered =
        std::any_of(results.begin(), results.end(), [](const auto& r) { return r.failure; });
    if (granted > 0 || unanswered) backend_->give_back(keys_, token_);
  }

  void not_granted(milliseconds wait_hint) {
    attempting_ = false;
    if (cancelled_ || !request_.wait) {
      finish(nullptr, nullptr);
      return;
    }
    if (!reported_waiting_) {
      reported_waiting_ = true;
      backend_->events().acquire_waiting();
    }
    if (again_) {
      attempt();
      return;
    }
    if (!listening_) {
      // The next attempt runs when the subscription is confirmed.
      listening_ = true;
      for (std::size_t i = 0; i < backend_->node_count(); ++i) {
        backend_->node_at(i).listen(keys_.channel, shared_from_this());
      }
    }
    // A waiting writer refreshes its place in the queue before it would expire.
    if (queued_writer_) {
      wait_hint = std::min(wait_hint, std::chrono::duration_cast<milliseconds>(
                                          backend_->settings().extend_every));
    }
    wait_for(std::max(wait_hint, milliseconds(1)));
  }

  void wait_for(std::chrono::nanoseconds delay) {
    wait_timer_.expires_after(delay);
    wait_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error && !self->finished_ && !self->attempting_) self->attempt();
    });
  }

  // A waiting acquire rides out a short outage (a restart, a killed connection) and retries;
  // the first attempt, and one that has failed for a whole expiry, report it.
  void attempt_failed(const std::string& why) {
    attempting_ = false;
    const auto now = clock::now();
    if (!trouble_since_) trouble_since_ = now;
    if (!cancelled_ && request_.wait && attempts_ > 1 &&
        now - *trouble_since_ < backend_->settings().expiry) {
      wait_for(std::min<std::chrono::nanoseconds>(milliseconds(100),
                                                  backend_->settings().command_timeout));
      return;
    }
    finish(std::make_exception_ptr(connection_error(backend_->message(why, request_.name))),
           nullptr);
  }

  void finish(std::exception_ptr error, std::unique_ptr<lease> granted) {
    if (finished_) return;
    finished_ = true;
    attempting_ = false;
    wait_timer_.cancel();
    // On every node, whatever listening_ says: after one RedLock node's subscription was lost
    // (listening_ reset), the others still hold this operation (a no-op where it is absent).
    for (std::size_t i = 0; i < backend_->node_count(); ++i) {
      backend_->node_at(i).unlisten(keys_.channel, this);
    }
    if (queued_writer_ && !granted) {
      // Leave the writers' queue, so readers held back by it may go on.
      backend_->eval_everywhere(release_script(), keys_, {token_, "withdraw", keys_.channel},
                                [](std::vector<command_result>) {});
    }
    auto done = std::move(done_);
    done(std::move(error), std::move(granted));
  }

  std::shared_ptr<redis_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  key_set keys_;
  std::string token_;
  std::string fence_key_;
  boost::asio::steady_timer wait_timer_;
  bool finished_ = false;
  bool cancelled_ = false;
  bool attempting_ = false;
  bool again_ = false;
  bool listening_ = false;
  bool queued_writer_ = false;
  bool reported_waiting_ = false;
  int attempts_ = 0;
  std::optional<clock::time_point> trouble_since_;
};

// ---------------------------------------------------------------------------------------------

redis_backend::redis_backend(options opts)
    : options_(validated(std::move(opts))),
      network_(std::make_unique<io_thread>()) {
  for (const auto& s : options_.servers) {
    if (!endpoint_.empty()) endpoint_ += ',';
    endpoint_ += s.host + ":" + std::to_string(s.port);
    nodes_.push_back(std::make_unique<node>(
        network_->executor(),
        server_settings{.host = s.host,
                        .port = s.port,
                        .user = options_.user,
                        .password = options_.password,
                        .database = options_.database,
                        .command_timeout = options_.command_timeout,
                        .client_name = options_.client_name}));
  }
  watchdog_timer_.emplace(network_->executor());
}

redis_backend::~redis_backend() {
  network_->stop();
  io().stop();
  // After the thread ended (or on it, when it is the one destroying us): hiredis contexts
  // and their descriptors go before the io_context they are bound to.
  watchdog_timer_.reset();
  nodes_.clear();
}

std::chrono::nanoseconds clock_drift(std::chrono::nanoseconds expiry) noexcept {
  return expiry / 100 + milliseconds(2);
}

clock::time_point valid_until(clock::time_point sent, std::chrono::nanoseconds expiry) noexcept {
  return sent + expiry - clock_drift(expiry);
}

std::string redis_backend::lock_key(std::string_view name) const {
  if (options_.plain_keys) return options_.key_prefix + std::string(name);
  return options_.key_prefix + "{" + escape_for_tag(name) + "}";
}

key_set redis_backend::keys_for(const acquire_request& request) const {
  const std::string base = options_.key_prefix + "{" + escape_for_tag(request.name) + "}";
  switch (request.kind) {
    case primitive::lock:
      if (options_.plain_keys) {
        const std::string key = lock_key(request.name);
        // Plain keys are the name as is, so a name could be another lock's counter.
        if (key.ends_with(plain_fence_suffix)) {
          throw std::invalid_argument(
              message(std::string("with plain_keys a lock name may not end in '") +
                          plain_fence_suffix + "' (the fencing counter of the lock without it)",
                      request.name));
        }
        return {"lock", {key, key + plain_fence_suffix}, key + ":dlock-released"};
      }
      return {"lock", {base, base + ":fence"}, base + ":released"};
    case primitive::reader_writer_lock:
      return {request.mode == lock_mode::shared ? "read" : "write",
              {base + ":rw:writer", base + ":fence", base + ":rw:readers", base + ":rw:waiting"},
              base + ":rw:released"};
    case primitive::semaphore:
      return {"sem", {base + ":sem", base + ":fence", base + ":sem:max"}, base + ":sem:released"};
  }
  throw std::invalid_argument("dlock: redis: unknown primitive");
}

std::string redis_backend::failures(const std::vector<command_result>& results) const {
  std::string text;
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::string why;
    if (results[i].failure) {
      why = *results[i].failure;
    } else if (results[i].value.is_error()) {
      why = results[i].value.text;
    } else {
      continue;
    }
    if (!text.empty()) text += "; ";
    text += (nodes_.size() > 1 ? nodes_[i]->endpoint() + ": " : std::string()) + why;
  }
  return text.empty() ? "no majority of the servers answered" : text;
}

void redis_backend::eval(std::size_t i, const script& which, const key_set& keys,
                         std::vector<std::string> arguments, reply_handler done) {
  auto command = evalsha_command(which, keys, arguments);
  node& target = *nodes_[i];
  auto retry = command;
  target.command(std::move(command), [&target, &which, retry = std::move(retry),
                                      done = std::move(done)](command_result result) mutable {
    if (script_unknown(result)) {
      send_whole_script(retry, which);
      target.command(std::move(retry), std::move(done));
      return;
    }
    done(std::move(result));
  });
}

command_result redis_backend::eval_here(std::size_t i, const script& which, const key_set& keys,
                                        const std::vector<std::string>& arguments) {
  auto command = evalsha_command(which, keys, arguments);
  command_result result = nodes_[i]->command_here(command);
  if (!script_unknown(result)) return result;
  send_whole_script(command, which);
  return nodes_[i]->command_here(command);
}

std::unique_ptr<lease> redis_backend::try_acquire_inline(const acquire_request& request) {
  const key_set keys = keys_for(request);
  const std::string token = random_token();
  const auto sent = clock::now();
  const acquire_answer answer = read_acquire_answer(
      eval_here(0, acquire_script(), keys,
                {token, milliseconds_argument(options_.expiry), keys.kind, "0",
                 std::to_string(request.max_count), "0"}));
  switch (answer.outcome) {
    case acquire_answer::kind::granted:
      return grant(request.name, keys, token, valid_until(sent, options_.expiry),
                   static_cast<std::uint64_t>(answer.value));
    case acquire_answer::kind::other_max_count:
      std::rethrow_exception(std::make_exception_ptr(max_count_mismatch(request, answer.value)));
    case acquire_answer::kind::failed:
      // Without a reply it may have been granted all the same: hand it back.
      // Weakly: a strong reference queued on its own network thread would keep the backend
      // (and that thread) alive forever.
      boost::asio::post(network_->executor(), [weak = weak_from_this(), keys, token] {
        if (auto self = weak.lock()) self->give_back(keys, token);
      });
      throw connection_error(message(answer.failure, request.name));
    default:
      return nullptr;
  }
}

void redis_backend::give_back(const key_set& keys, const std::string& token) {
  const auto until = clock::now() + options_.expiry;
  for (std::size_t i = 0; i < nodes_.size(); ++i) give_back_on(i, keys, token, until);
}

// A node that does not answer (paused, restarting) may still hold the grant and answer later:
// try again until the grant would have expired anyway, or the provider is gone.
void redis_backend::give_back_on(std::size_t i, const key_set& keys, const std::string& token,
                                 clock::time_point until) {
  std::weak_ptr<redis_backend> weak = shared_from_this();
  eval(i, release_script(), keys, {token, keys.kind, keys.channel},
       [weak, i, keys, token, until](command_result result) {
         auto self = weak.lock();
         if (!self || !result.failure || clock::now() >= until) return;
         auto timer = std::make_shared<boost::asio::steady_timer>(self->network_executor());
         timer->expires_after(std::min<std::chrono::nanoseconds>(milliseconds(100),
                                                                 self->options_.command_timeout));
         timer->async_wait([weak, timer, i, keys, token, until](const boost::system::error_code&) {
           if (auto again = weak.lock()) again->give_back_on(i, keys, token, until);
         });
       });
}

void redis_backend::eval_everywhere(const script& which, const key_set& keys,
                                    const std::vector<std::string>& arguments,
                                    fan_out_handler done) {
  auto all = std::make_shared<fan_out>(nodes_.size(), std::move(done));
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    eval(i, which, keys, arguments, fan_out::slot(all, i));
  }
}

void redis_backend::command_everywhere(const std::vector<std::string>& arguments,
                                       fan_out_handler done) {
  auto all = std::make_shared<fan_out>(nodes_.size(), std::move(done));
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->command(arguments, fan_out::slot(all, i));
  }
}

std::shared_ptr<acquire_operation> redis_backend::start_acquire(acquire_request request,
                                                                acquire_completion done) {
  auto op = std::make_shared<redis_acquire>(shared_from_this(), std::move(request),
                                            std::move(done));
  op->start();
  return op;
}

template <typename Result, typename Work>
Result redis_backend::call_on_network_thread(Work work, std::chrono::nanoseconds timeout,
                                        const std::string& timed_out) {
  auto promise = std::make_shared<std::promise<Result>>();
  auto future = promise->get_future();
  boost::asio::post(network_->executor(), [promise, work = std::move(work)]() mutable {
    work(promise);
  });
  if (future.wait_for(timeout) != std::future_status::ready) throw connection_error(timed_out);
  return future.get();
}

std::optional<std::uint32_t> redis_backend::current_count(const acquire_request& request) {
  if (network_->running_in_this_thread()) {
    throw std::logic_error("dlock: redis: current_count() called on the network thread");
  }
  const key_set keys = keys_for(request);
  const std::uint32_t max_count = request.max_count;
  return call_on_network_thread<std::uint32_t>(
      [this, keys, max_count, name = request.name, request](
          const std::shared_ptr<std::promise<std::uint32_t>>& promise) {
        eval_everywhere(count_script(), keys, {std::to_string(max_count)},
                        [this, promise, max_count, name, keys, request](std::vector<command_result> results) {
          long long held = 0;
          std::size_t answered = 0;
          for (const auto& r : results) {
            if (r.failure || !is_integer_pair(r.value)) continue;
            if (r.value.elements[0].integer == -2) {
              promise->set_exception(std::make_exception_ptr(
                  max_count_mismatch(request, r.value.elements[1].integer)));
              return;
            }
            ++answered;
            held = std::max(held, r.value.elements[0].integer);
          }
          if (answered < quorum(keys)) {
            promise->set_exception(
                std::make_exception_ptr(connection_error(message(failures(results), name))));
            return;
          }
          promise->set_value(static_cast<std::uint32_t>(
              std::max<long long>(0, static_cast<long long>(max_count) - held)));
        });
      },
      options_.command_timeout * 2, message("no answer to the slot count", request.name));
}

// ---------------------------------------------------------------------------------------------
// The watchdog: one timer per provider, running while grants are held.

std::unique_ptr<lease> redis_backend::grant(const std::string& name, const key_set& keys,
                                            const std::string& token,
                                            clock::time_point valid_until,
                                            std::uint64_t fencing_token) {
  auto held = std::make_shared<held_grant>();
  held->name = name;
  held->keys = keys;
  held->token = token;
  held->valid_until = valid_until;
  auto granted = std::make_unique<redis_lease>(shared_from_this(), held, fencing_token);
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    held_.push_back(held);
    if (!watchdog_running_) {
      watchdog_running_ = true;
      start = true;
    }
  }
  if (start) {
    // The timer belongs to the network thread; a grant may come from the caller's.
    boost::asio::post(network_->executor(), [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->next_extension_ = clock::now() + self->options_.extend_every;
        self->schedule_watchdog();
      }
    });
  }
  return granted;
}

void redis_backend::schedule_watchdog() {
  clock::time_point wake = next_extension_;
  {
    std::lock_guard lock(mutex_);
    for (const auto& grant : held_) wake = std::min(wake, grant->valid_until);
  }
  watchdog_timer_->expires_at(wake);
  std::weak_ptr<redis_backend> weak = weak_from_this();
  watchdog_timer_->async_wait([weak](const boost::system::error_code& error) {
    if (error) return;
    if (auto self = weak.lock()) self->watchdog_tick();
  });
}

void redis_backend::watchdog_tick() {
  const auto now = clock::now();
  std::vector<std::shared_ptr<held_grant>> to_extend;
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    // A grant whose validity passed unconfirmed may already belong to someone else.
    std::erase_if(held_, [&](const std::shared_ptr<held_grant>& grant) {
      if (grant->valid_until > now) return false;
      grant->registered = false;
      lost.push_back(grant->lost);
      return true;
    });
    if (held_.empty()) {
      watchdog_running_ = false;
    } else if (now >= next_extension_) {
      to_extend = held_;
    }
  }
  for (auto& signal : lost) signal.request_stop();
  if (!to_extend.empty()) {
    next_extension_ = now + options_.extend_every;
    // Issued back to back, the extensions leave in one write per server: a pipelined batch.
    for (const auto& grant : to_extend) extend(grant);
  }
  bool running;
  {
    std::lock_guard lock(mutex_);
    running = watchdog_running_;
  }
  if (running) schedule_watchdog();
}

void redis_backend::extend(const std::shared_ptr<held_grant>& grant) {
  const auto sent = clock::now();
  std::weak_ptr<redis_backend> weak = weak_from_this();
  eval_everywhere(
      extend_script(), grant->keys,
      {grant->token, grant->keys.kind, milliseconds_argument(options_.expiry)},
      [weak, grant, sent](std::vector<command_result> results) {
        auto self = weak.lock();
        if (!self) return;
        std::size_t confirmed = 0, not_ours = 0;
        for (const auto& r : results) {
          if (r.failure || r.value.type != reply::kind::integer) continue;
          (r.value.integer == 1 ? confirmed : not_ours) += 1;
        }
        bool lost = false;
        {
          std::lock_guard lock(self->mutex_);
          if (!grant->registered) return;  // released or lost meanwhile
          const std::size_t quorum = self->quorum(grant->keys);
          if (confirmed >= quorum) {
            grant->valid_until = valid_until(sent, self->options_.expiry);
            return;
          }
          // "Not ours" from enough nodes that a quorum can no longer confirm: gone now.
          if (not_ours > self->node_count() - quorum) {
            grant->registered = false;
            std::erase(self->held_, grant);
            lost = true;
          }
        }
        if (lost) {
          grant->lost.request_stop();
          return;
        }
        self->events().extension_failed();
        self->events().background_error(std::make_exception_ptr(connection_error(
            self->message("lease extension failed: " + self->failures(results), grant->name))));
      });
}

void redis_backend::release(const std::shared_ptr<held_grant>& grant, bool wait) {
  {
    std::lock_guard lock(mutex_);
    // First thing: the watchdog must never extend a grant that is being released.
    grant->registered = false;
    std::erase(held_, grant);
  }
  const std::vector<std::string> arguments{grant->token, grant->keys.kind, grant->keys.channel};
  if (wait && nodes_.size() == 1 && !network_->running_in_this_thread()) {
    // One server: straight from the caller's thread, no hop to the network thread and back.
    const command_result result = eval_here(0, release_script(), grant->keys, arguments);
    if (result.failure || result.value.is_error()) {
      throw connection_error(message("release failed: " + failures({result}), grant->name));
    }
    return;
  }
  auto send = [this, grant](fan_out_handler done) {
    eval_everywhere(release_script(), grant->keys,
                    {grant->token, grant->keys.kind, grant->keys.channel}, std::move(done));
  };
  if (!wait || network_->running_in_this_thread()) {
    std::weak_ptr<redis_backend> weak = weak_from_this();
    boost::asio::post(network_->executor(), [send, weak, grant]() mutable {
      send([weak, grant](std::vector<command_result> results) {
        auto self = weak.lock();
        if (!self) return;
        std::size_t answered = 0;
        for (const auto& r : results) answered += !r.failure && !r.value.is_error();
        if (answered < self->majority()) {
          self->events().background_error(std::make_exception_ptr(connection_error(
              self->message("release failed: " + self->failures(results), grant->name))));
        }
      });
    });
    return;
  }
  call_on_network_thread<bool>(
      [this, send, grant](const std::shared_ptr<std::promise<bool>>& promise) mutable {
        send([this, promise, grant](std::vector<command_result> results) {
          std::size_t answered = 0;
          for (const auto& r : results) answered += !r.failure && !r.value.is_error();
          if (answered < majority()) {
            promise->set_exception(std::make_exception_ptr(connection_error(
                message("release failed: " + failures(results), grant->name))));
          } else {
            promise->set_value(true);
          }
        });
      },
      options_.command_timeout * 2, message("no answer to the release", grant->name));
}

std::size_t redis_backend::channels_in_use() {
  return call_on_network_thread<std::size_t>(
      [this](const std::shared_ptr<std::promise<std::size_t>>& promise) {
        std::size_t total = 0;
        for (const auto& n : nodes_) total += n->channels_in_use();
        promise->set_value(total);
      },
      std::chrono::seconds(5), "dlock: redis " + endpoint_ + ": the network thread does not answer");
}

}  // namespace dlock::redis::detail
