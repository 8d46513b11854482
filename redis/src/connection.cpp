#include "connection.hpp"

#include <boost/asio/post.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "asio_adapter.hpp"

namespace dlock::redis::detail {

namespace {

std::string milliseconds_text(std::chrono::nanoseconds duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()) +
         " ms";
}

}  // namespace

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

}  // namespace dlock::redis::detail
