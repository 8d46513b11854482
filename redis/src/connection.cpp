#include "connection.hpp"

#include <algorithm>
#include <cerrno>

#include <boost/asio/post.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "asio_adapter.hpp"

namespace dlock::redis::detail {

reply copy_reply(const redisReply& from) {
  reply to;
  switch (from.type) {
    case REDIS_REPLY_STRING: to.type = reply::kind::string; break;
    case REDIS_REPLY_ARRAY: to.type = reply::kind::array; break;
    case REDIS_REPLY_INTEGER: to.type = reply::kind::integer; break;
    case REDIS_REPLY_STATUS: to.type = reply::kind::status; break;
    case REDIS_REPLY_ERROR: to.type = reply::kind::error; break;
    default: to.type = reply::kind::nil; break;
  }
  to.integer = from.integer;
  if (from.str != nullptr) to.text.assign(from.str, from.len);
  for (std::size_t i = 0; i < from.elements; ++i) to.elements.push_back(copy_reply(*from.element[i]));
  return to;
}

namespace {

std::string milliseconds_text(std::chrono::nanoseconds duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()) +
         " ms";
}

}  // namespace

std::vector<log_in_step> log_in_steps(const server_settings& settings, bool for_subscriptions) {
  std::vector<log_in_step> steps;
  if (settings.password) {
    std::vector<std::string> auth{"AUTH"};
    if (!settings.user.empty()) auth.push_back(settings.user);
    auth.push_back(*settings.password);
    steps.push_back({std::move(auth), "authentication failed"});
  }
  if (settings.database != 0 && !for_subscriptions) {
    steps.push_back({{"SELECT", std::to_string(settings.database)},
                     "SELECT " + std::to_string(settings.database) + " failed"});
  }
  steps.push_back({{"CLIENT", "SETNAME", settings.client_name}, "CLIENT SETNAME failed"});
  return steps;
}

namespace {

timeval to_timeval(std::chrono::nanoseconds duration) {
  const auto micro = std::chrono::duration_cast<std::chrono::microseconds>(duration).count();
  return timeval{.tv_sec = static_cast<time_t>(micro / 1000000),
                 .tv_usec = static_cast<suseconds_t>(micro % 1000000)};
}

/// Runs one command on a blocking context.
command_result run_blocking(redisContext* context, const std::vector<std::string>& arguments) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& argument : arguments) {
    argv.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  auto* raw = static_cast<redisReply*>(redisCommandArgv(
      context, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  if (raw == nullptr) {
    return command_result{.failure = std::string("connection lost: ") + context->errstr};
  }
  command_result result{.value = copy_reply(*raw)};
  freeReplyObject(raw);
  return result;
}

}  // namespace

sync_connections::~sync_connections() {
  for (redisContext* context : idle_) redisFree(context);
}

redisContext* sync_connections::connect(std::string& failure) {
  redisContext* context = redisConnectWithTimeout(settings_.host.c_str(), settings_.port,
                                                  to_timeval(settings_.command_timeout));
  if (context == nullptr || context->err != 0) {
    failure = "cannot connect: " + std::string(context ? context->errstr : "out of memory");
    if (context != nullptr) redisFree(context);
    return nullptr;
  }
  redisSetTimeout(context, to_timeval(settings_.command_timeout));
  for (const auto& step : log_in_steps(settings_, false)) {
    command_result result = run_blocking(context, step.command);
    if (result.failure || result.value.is_error()) {
      failure = result.failure ? *result.failure : step.failure + ": " + result.value.text;
      redisFree(context);
      return nullptr;
    }
  }
  return context;
}

command_result sync_connections::command(const std::vector<std::string>& arguments) {
  redisContext* context = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      context = idle_.back();
      idle_.pop_back();
    }
  }
  if (context != nullptr) {
    command_result result = run_blocking(context, arguments);
    if (!result.failure) {
      std::lock_guard lock(mutex_);
      idle_.push_back(context);
      return result;
    }
    // An idle connection may have been closed meanwhile (CLIENT KILL, a server restart, an
    // idle timeout): then try once more on a new one. A timeout is not retried, so that a hung
    // server costs one command timeout, not two.
    const bool closed = context->err == REDIS_ERR_EOF ||
                        (context->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE));
    redisFree(context);
    if (!closed) return result;
  }
  std::string failure;
  context = connect(failure);
  if (context == nullptr) return command_result{.failure = failure};
  command_result result = run_blocking(context, arguments);
  if (result.failure) {
    redisFree(context);
  } else {
    std::lock_guard lock(mutex_);
    idle_.push_back(context);
  }
  return result;
}

struct connection::pending_command {
  reply_handler done;
};

connection::connection(boost::asio::any_io_executor executor, const server_settings& settings,
                       bool for_subscriptions, std::function<void()> on_down)
    : executor_(executor),
      settings_(settings),
      for_subscriptions_(for_subscriptions),
      on_down_(std::move(on_down)),
      timeout_timer_(executor) {}

connection::~connection() {
  closing_ = true;
  fail_waiting("the provider is shutting down");
  if (context_ != nullptr) {
    last_error_ = "the provider is shutting down";
    redisAsyncContext* context = context_;
    context_ = nullptr;
    context->data = nullptr;
    redisAsyncFree(context);
  }
}

std::string connection::failure_text() const {
  if (context_ != nullptr && context_->err != 0 && last_error_.empty()) {
    return std::string("connection lost: ") + context_->errstr;
  }
  return last_error_.empty() ? std::string("connection closed") : last_error_;
}

void connection::command(std::vector<std::string> arguments, reply_handler done) {
  if (closing_) {
    boost::asio::post(executor_, [done = std::move(done)]() mutable {
      done(command_result{.failure = "the provider is shutting down"});
    });
    return;
  }
  waiting_.push_back([this, arguments = std::move(arguments),
                      done = std::move(done)](const std::string* failure) mutable {
    if (failure != nullptr) {
      boost::asio::post(executor_, [done = std::move(done), why = *failure]() mutable {
        done(command_result{.failure = why});
      });
      return;
    }
    send(arguments, &connection::on_reply, new pending_command{std::move(done)}, true);
  });
  if (state_ == state::ready) {
    became_ready();
  } else if (state_ == state::down) {
    connect();
  }
}

void connection::subscription_command(std::vector<std::string> arguments,
                                      void (*callback)(redisAsyncContext*, void*, void*),
                                      void* privdata,
                                      std::function<void(const std::string&)> failed) {
  if (closing_) return;
  waiting_.push_back([this, arguments = std::move(arguments), callback, privdata,
                      failed = std::move(failed)](const std::string* failure) {
    if (failure == nullptr) {
      send(arguments, callback, privdata, false);
    } else {
      failed(*failure);
    }
  });
  if (state_ == state::ready) {
    became_ready();
  } else if (state_ == state::down) {
    connect();
  }
}

void connection::send(const std::vector<std::string>& arguments,
                      void (*callback)(redisAsyncContext*, void*, void*), void* privdata,
                      bool timed) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& argument : arguments) {
    argv.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  if (context_ == nullptr ||
      redisAsyncCommandArgv(context_, callback, privdata, static_cast<int>(argv.size()),
                            argv.data(), lengths.data()) != REDIS_OK) {
    // Only a context that is being torn down refuses a command: answer like a lost one.
    if (callback == &connection::on_reply) {
      std::unique_ptr<pending_command> pending(static_cast<pending_command*>(privdata));
      boost::asio::post(executor_, [done = std::move(pending->done),
                                    why = failure_text()]() mutable {
        done(command_result{.failure = why});
      });
    }
    return;
  }
  if (timed) {
    outstanding_.push_back(std::chrono::steady_clock::now());
    arm_timeout();
  }
}

void connection::arm_timeout() {
  if (timer_armed_ || outstanding_.empty()) return;
  timer_armed_ = true;
  timeout_timer_.expires_at(outstanding_.front() + settings_.command_timeout);
  timeout_timer_.async_wait([this](const boost::system::error_code& error) {
    timer_armed_ = false;
    if (error || closing_) return;
    if (!outstanding_.empty() &&
        std::chrono::steady_clock::now() - outstanding_.front() >= settings_.command_timeout) {
      drop("no reply within " + milliseconds_text(settings_.command_timeout));
      return;
    }
    arm_timeout();
  });
}

void connection::connect() {
  state_ = state::logging_in;
  last_error_.clear();
  redisAsyncContext* context = redisAsyncConnect(settings_.host.c_str(), settings_.port);
  if (context == nullptr || context->err != 0) {
    std::string why = "cannot connect: " + std::string(context ? context->errstr : "out of memory");
    if (context != nullptr) redisAsyncFree(context);
    state_ = state::down;
    fail_waiting(why);
    return;
  }
  context->data = this;
  if (!attach_to_asio(context, executor_)) {
    redisAsyncFree(context);
    state_ = state::down;
    fail_waiting("cannot attach the connection to the network thread");
    return;
  }
  context_ = context;
  redisAsyncSetConnectCallback(context, &connection::on_connect);
  redisAsyncSetDisconnectCallback(context, &connection::on_disconnect);
  log_in();
}

// Logging in goes before any other command, and nothing else is sent until it succeeded: with
// ACL users, commands pipelined behind a refused AUTH would run as the default user.
void connection::log_in() {
  auto steps = log_in_steps(settings_, for_subscriptions_);
  const std::size_t count = steps.size();
  for (std::size_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    const std::string what = steps[i].failure;
    auto step_done = [this, last, what](command_result result) {
      if (state_ != state::logging_in) return;
      if (result.failure) {
        fail_waiting(*result.failure);
        return;
      }
      if (result.value.is_error()) {
        // The server's own words (e.g. WRONGPASS ...) never repeat the password.
        last_error_ = what + ": " + result.value.text;
        fail_waiting(last_error_);
        drop(last_error_);
        return;
      }
      if (last) {
        state_ = state::ready;
        became_ready();
      }
    };
    send(steps[i].command, &connection::on_reply, new pending_command{std::move(step_done)}, true);
  }
}

void connection::became_ready() {
  auto sends = std::move(waiting_);
  waiting_.clear();
  for (auto& send_one : sends) send_one(nullptr);
}

void connection::fail_waiting(const std::string& why) {
  auto sends = std::move(waiting_);
  waiting_.clear();
  for (auto& send_one : sends) send_one(&why);
}

void connection::drop(const std::string& why) {
  if (context_ == nullptr) return;
  last_error_ = why;
  const bool was_ready = state_ == state::ready;
  redisAsyncContext* context = context_;
  context_ = nullptr;
  state_ = state::down;
  outstanding_.clear();
  timeout_timer_.cancel();
  // Fails every command in flight (their callbacks run with no reply); inside a hiredis
  // callback the free is deferred until it returns.
  redisAsyncFree(context);
  fail_waiting(why);
  if (was_ready && on_down_) on_down_();
}

void connection::on_connect(const redisAsyncContext* context, int status) {
  auto* self = static_cast<connection*>(context->data);
  // A context dropped earlier may report after a new one took its place.
  if (self == nullptr || status == REDIS_OK || self->context_ != context) return;
  // hiredis frees the context after this; the log-in commands fail with this text.
  self->last_error_ = std::string("cannot connect: ") + context->errstr;
  self->context_ = nullptr;
  self->state_ = state::down;
  self->outstanding_.clear();
  self->fail_waiting(self->last_error_);
}

void connection::on_disconnect(const redisAsyncContext* context, int) {
  auto* self = static_cast<connection*>(context->data);
  if (self == nullptr || self->context_ != context) return;
  const bool was_ready = self->state_ == state::ready;
  self->context_ = nullptr;
  self->state_ = state::down;
  self->outstanding_.clear();
  self->timeout_timer_.cancel();
  self->fail_waiting(self->last_error_.empty() ? "connection lost" : self->last_error_);
  if (was_ready && self->on_down_) self->on_down_();
}

void connection::on_reply(redisAsyncContext* context, void* raw_reply, void* privdata) {
  std::unique_ptr<pending_command> pending(static_cast<pending_command*>(privdata));
  auto* self = static_cast<connection*>(context->data);
  command_result result;
  if (raw_reply == nullptr) {
    if (self != nullptr && !self->last_error_.empty()) {
      result.failure = self->last_error_;
    } else if (context->err != 0) {
      result.failure = std::string("connection lost: ") + context->errstr;
    } else {
      result.failure = "connection closed";
    }
  } else {
    result.value = copy_reply(*static_cast<redisReply*>(raw_reply));
  }
  if (self != nullptr && self->context_ == context && !self->outstanding_.empty()) {
    self->outstanding_.pop_front();
  }
  pending->done(std::move(result));
}

node::node(boost::asio::any_io_executor executor, server_settings settings)
    : executor_(executor),
      settings_(std::move(settings)),
      endpoint_(settings_.host + ":" + std::to_string(settings_.port)),
      commands_(executor, settings_, false, {}),
      subscriber_(executor, settings_, true, [this] { subscriber_down(); }),
      blocking_(settings_) {}

node::~node() = default;

void node::drop(const std::string& why) {
  commands_.drop(why);
  subscriber_.drop(why);
}

void node::send_subscription(const char* verb, const std::string& name) {
  subscriber_.subscription_command({verb, name}, &node::on_subscription_reply, this,
                                   [this, name](const std::string&) { subscription_failed(name); });
}

void node::listen(const std::string& name, const std::shared_ptr<channel_listener>& listener) {
  auto [it, created] = channels_.try_emplace(name);
  auto& listeners = it->second.listeners;
  // Listening again is a no-op: a RedLock acquire re-listens on every node after one node's
  // subscription was lost, and must not be told twice (or kept twice) by the others.
  if (std::find(listeners.begin(), listeners.end(), listener) != listeners.end()) return;
  listeners.push_back(listener);
  if (created) {
    send_subscription("SUBSCRIBE", name);
  } else if (it->second.state == subscription::subscribed) {
    notify({listener}, channel_event::subscribed);
  }
}

void node::unlisten(const std::string& name, const channel_listener* listener) {
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  auto& listeners = it->second.listeners;
  std::erase_if(listeners, [listener](const auto& l) { return l.get() == listener; });
  if (listeners.empty() && it->second.state == subscription::subscribed) {
    it->second.state = subscription::unsubscribing;
    send_subscription("UNSUBSCRIBE", name);
  }
}

void node::notify(std::vector<std::shared_ptr<channel_listener>> listeners, channel_event event) {
  boost::asio::post(executor_, [listeners = std::move(listeners), event] {
    for (const auto& listener : listeners) listener->on_channel_event(event);
  });
}

void node::on_subscription_reply(redisAsyncContext* context, void* raw_reply, void* privdata) {
  if (raw_reply == nullptr || context->data == nullptr) return;  // lost: subscriber_down()
  static_cast<node*>(privdata)->subscription_reply(copy_reply(*static_cast<redisReply*>(raw_reply)));
}

void node::subscription_reply(const reply& message) {
  if (message.type != reply::kind::array || message.elements.size() < 2) return;
  const std::string& verb = message.elements[0].text;
  auto it = channels_.find(message.elements[1].text);
  if (it == channels_.end()) return;
  channel& c = it->second;
  if (verb == "subscribe") {
    if (c.listeners.empty()) {
      c.state = subscription::unsubscribing;
      send_subscription("UNSUBSCRIBE", it->first);
    } else {
      c.state = subscription::subscribed;
      notify(c.listeners, channel_event::subscribed);
    }
  } else if (verb == "message") {
    notify(c.listeners, channel_event::released);
  } else if (verb == "unsubscribe" && c.state == subscription::unsubscribing) {
    if (c.listeners.empty()) {
      channels_.erase(it);
    } else {
      // Listeners came while the UNSUBSCRIBE was in flight: subscribe again for them.
      c.state = subscription::subscribing;
      send_subscription("SUBSCRIBE", it->first);
    }
  }
}

// A (UN)SUBSCRIBE that never reached the server (it was down, or the log-in failed): the
// channel is forgotten and its listeners hear `lost`, as after subscriber_down(), so that
// they listen again. Told after a pause, so that a server that stays down is not asked in a
// tight loop of listen, fail, retry.
void node::subscription_failed(const std::string& name) {
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  auto listeners = std::move(it->second.listeners);
  channels_.erase(it);
  if (listeners.empty()) return;
  auto pause = std::make_shared<boost::asio::steady_timer>(executor_);
  pause->expires_after(std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(100),
                                                          settings_.command_timeout));
  pause->async_wait([pause, listeners = std::move(listeners)](const boost::system::error_code&) {
    for (const auto& listener : listeners) listener->on_channel_event(channel_event::lost);
  });
}

void node::subscriber_down() {
  std::vector<std::shared_ptr<channel_listener>> everyone;
  for (auto& [name, c] : channels_) {
    everyone.insert(everyone.end(), c.listeners.begin(), c.listeners.end());
  }
  channels_.clear();
  notify(std::move(everyone), channel_event::lost);
}

}  // namespace dlock::redis::detail
