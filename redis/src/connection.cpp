#include "connection.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include "duration_text.hpp"
#include "transport.hpp"

namespace dlock::redis::detail {

namespace {

/// `arguments` in RESP, or nothing when hiredis could not allocate it.
std::optional<std::string> formatted_command(const std::vector<std::string>& arguments) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& argument : arguments) {
    argv.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  char* formatted = nullptr;
  const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(),
                                            lengths.data());
  if (length < 0) return std::nullopt;
  std::string text(formatted, static_cast<std::size_t>(length));
  redisFreeCommand(formatted);
  return text;
}

/// Waits until `descriptor` is ready for `events` or `deadline` passed (false then).
bool wait_ready(int descriptor, short events, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd watched{.fd = descriptor, .events = events, .revents = 0};
    const int ready = ::poll(&watched, 1, static_cast<int>(left.count()));
    if (ready > 0) return true;  // an error or a hang-up shows in the send or the read
    if (ready < 0 && errno != EINTR) return true;
  }
}

}  // namespace

/// What the transport reads into and writes from: held by pending operations as well, so that
/// it outlives them even when the connection goes first.
struct connection::buffers {
  std::array<char, 16 * 1024> input;
  std::string writing;
};

void connection::reader_deleter::operator()(redisReader* reader) const noexcept {
  redisReaderFree(reader);
}

connection::connection(boost::asio::any_io_executor executor, const server_settings& settings,
                       std::function<void()> on_down, std::function<void(const reply&)> on_message)
    : executor_(executor),
      settings_(settings),
      on_down_(std::move(on_down)),
      on_message_(std::move(on_message)),
      timeout_timer_(executor) {}

connection::~connection() {
  closing_ = true;
  alive_.reset();
  fail_waiting("the provider is shutting down");
  if (transport_) transport_->close();
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
    send(arguments, std::move(done));
  });
  if (state_ == state::ready) {
    became_ready();
  } else if (state_ == state::down) {
    connect();
  }
}

void connection::subscription_command(std::vector<std::string> arguments,
                                      std::function<void(const std::string&)> failed) {
  if (closing_) return;
  waiting_.push_back(
      [this, arguments = std::move(arguments), failed = std::move(failed)](const std::string* failure) {
        if (failure == nullptr) {
          send(arguments, {});
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

void connection::open() {
  if (!closing_ && state_ == state::down) connect();
}

// A command without `done` (a subscription's) is not timed: its answers come as messages.
void connection::send(const std::vector<std::string>& arguments, reply_handler done) {
  const auto command = formatted_command(arguments);
  if (!command) {
    if (done) {
      boost::asio::post(executor_, [done = std::move(done)]() mutable {
        done(command_result{.failure = "out of memory formatting a command"});
      });
    }
    return;
  }
  output_.append(*command);
  if (done) {
    awaited_.push_back({std::chrono::steady_clock::now(), std::move(done)});
    arm_timeout();
  }
  flush();
}

void connection::flush() {
  if (write_in_flight_ || output_.empty() || !transport_ || state_ == state::connecting) return;
  write_in_flight_ = true;
  buffers_->writing.swap(output_);
  output_.clear();
  transport_->async_write(
      boost::asio::buffer(buffers_->writing),
      [this, alive = std::weak_ptr<bool>(alive_), t = transport_, b = buffers_](
          const boost::system::error_code& error, std::size_t) {
        if (alive.expired() || t != transport_) return;
        write_in_flight_ = false;
        if (error) {
          drop("connection lost: " + t->failure_text(error));
          return;
        }
        flush();
      });
}

void connection::read() {
  transport_->async_read_some(
      boost::asio::buffer(buffers_->input),
      [this, alive = std::weak_ptr<bool>(alive_), t = transport_, b = buffers_](
          const boost::system::error_code& error, std::size_t bytes) {
        if (alive.expired() || t != transport_) return;
        if (error) {
          drop(error == boost::asio::error::eof ? std::string("connection closed by the server")
                                                : "connection lost: " + t->failure_text(error));
          return;
        }
        // A reply's handler may have ended the connection, or the provider that owns it.
        if (received(bytes) && t == transport_) read();
      });
}

// Hands every complete reply to the command waiting for it (or, on a subscriber connection, to
// on_message). A handler may drop the connection: then the rest is not for anyone any more. It
// may even destroy it (its lease ends the provider's last owner, on this thread, as hiredis
// allowed inside its callbacks): then this returns false at once, touching nothing.
bool connection::received(std::size_t bytes) {
  const std::weak_ptr<bool> alive = alive_;
  const std::shared_ptr<transport> current = transport_;
  if (redisReaderFeed(reader_.get(), buffers_->input.data(), bytes) != REDIS_OK) {
    drop(std::string("protocol error: ") + reader_->errstr);
    return true;
  }
  while (transport_ == current) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      drop(std::string("protocol error: ") + reader_->errstr);
      return true;
    }
    if (raw == nullptr) return true;
    reply value = copy_reply(*static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    if (!awaited_.empty()) {
      reply_handler done = std::move(awaited_.front().done);
      awaited_.pop_front();
      done(command_result{.value = std::move(value)});
    } else if (on_message_) {
      on_message_(value);
    }
    if (alive.expired()) return false;
  }
  return true;
}

// The transport's read stays pending in the reactor meanwhile: it is not run while this reads,
// and once it runs again it reads only what came after (a close while idle, say).
std::optional<command_result> connection::command_now(const std::vector<std::string>& arguments) {
  const int descriptor = transport_ ? transport_->descriptor() : -1;
  if (state_ != state::ready || descriptor < 0 || closing_ || write_in_flight_ ||
      !output_.empty() || !awaited_.empty() || !waiting_.empty()) {
    return std::nullopt;
  }
  const auto command = formatted_command(arguments);
  if (!command) return command_result{.failure = "out of memory formatting a command"};
  const auto deadline = std::chrono::steady_clock::now() + settings_.command_timeout;
  const auto failed = [this](const std::string& why) {
    drop(why);
    return command_result{.failure = why};
  };
  const auto timed_out = [this, &failed] {
    timed_out_ = true;
    return failed("no reply within " + milliseconds_text(settings_.command_timeout));
  };
  for (std::size_t written = 0; written < command->size();) {
    const ssize_t n = ::send(descriptor, command->data() + written, command->size() - written,
                             MSG_NOSIGNAL);
    if (n >= 0) {
      written += static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(descriptor, POLLOUT, deadline)) return timed_out();
    } else if (errno != EINTR) {
      return failed(std::string("connection lost: ") + std::strerror(errno));
    }
  }
  // The reply takes the server a while: wait first, then read, rather than a read that finds
  // nothing yet.
  while (true) {
    if (!wait_ready(descriptor, POLLIN, deadline)) return timed_out();
    const ssize_t n = ::recv(descriptor, buffers_->input.data(), buffers_->input.size(), 0);
    if (n == 0) return failed("connection closed by the server");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return failed(std::string("connection lost: ") + std::strerror(errno));
    }
    if (redisReaderFeed(reader_.get(), buffers_->input.data(), static_cast<std::size_t>(n)) !=
        REDIS_OK) {
      return failed(std::string("protocol error: ") + reader_->errstr);
    }
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      return failed(std::string("protocol error: ") + reader_->errstr);
    }
    if (raw != nullptr) {
      reply value = copy_reply(*static_cast<redisReply*>(raw));
      freeReplyObject(raw);
      return command_result{.value = std::move(value)};
    }
  }
}

void connection::arm_timeout() {
  if (timer_armed_ || awaited_.empty()) return;
  timer_armed_ = true;
  timeout_timer_.expires_at(awaited_.front().sent + settings_.command_timeout);
  timeout_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](
                                const boost::system::error_code& error) {
    // A cancelled wait is drop()'s, which disarmed the timer itself.
    if (alive.expired() || error) return;
    timer_armed_ = false;
    if (closing_) return;
    if (!awaited_.empty() &&
        std::chrono::steady_clock::now() - awaited_.front().sent >= settings_.command_timeout) {
      const std::string limit = milliseconds_text(settings_.command_timeout);
      timed_out_ = true;
      drop(state_ == state::connecting ? "cannot connect: no answer within " + limit
                                       : "no reply within " + limit);
      return;
    }
    arm_timeout();
  });
}

void connection::connect() {
  state_ = state::connecting;
  last_error_.clear();
  timed_out_ = false;
  late_steps_.clear();
  reader_.reset(redisReaderCreate());
  buffers_ = std::make_shared<buffers>();
  transport_ = make_transport(executor_, settings_);
  if (!reader_) {
    drop("cannot connect: out of memory");
    return;
  }
  // Queued now, written once open: the log-in's timeout also bounds connecting.
  log_in();
  transport_->async_open([this, alive = std::weak_ptr<bool>(alive_),
                          t = transport_](std::string failure) {
    if (alive.expired() || t != transport_) return;
    opened(std::move(failure));
  });
}

void connection::opened(std::string failure) {
  if (!failure.empty()) {
    drop("cannot connect: " + failure);
    return;
  }
  state_ = state::logging_in;
  send_late_log_in_steps();
  read();
  flush();
}

void connection::send_late_log_in_steps() {
  auto steps = std::move(late_steps_);
  late_steps_.clear();
  for (auto& [make, done] : steps) send(make(), std::move(done));
}

// Logging in goes before any other command, and nothing else is sent until it succeeded: with
// ACL users, commands pipelined behind a refused AUTH would run as the default user.
void connection::log_in() {
  auto steps = log_in_steps(settings_, static_cast<bool>(on_message_));
  const std::size_t count = steps.size();
  for (std::size_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    const std::string what = steps[i].failure;
    auto step_done = [this, last, what, check = steps[i].check](command_result result) {
      if (state_ != state::logging_in) return;
      if (result.failure) {
        fail_waiting(*result.failure);
        return;
      }
      const std::string refused =
          result.value.is_error() ? result.value.text : (check ? check(result.value) : "");
      if (!refused.empty()) {
        // The server's own words (e.g. WRONGPASS ...) never repeat the password.
        last_error_ = what + ": " + refused;
        fail_waiting(last_error_);
        drop(last_error_);
        return;
      }
      if (last) {
        state_ = state::ready;
        if (link_observer_) link_observer_(nullptr);
        became_ready();
      }
    };
    if (steps[i].late_command) {
      late_steps_.emplace_back(steps[i].late_command, std::move(step_done));
    } else {
      send(steps[i].command, std::move(step_done));
    }
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
  if (!transport_) return;
  last_error_ = why;
  const bool was_ready = state_ == state::ready;
  // Pending operations keep the transport and buffers; they complete as stale.
  std::shared_ptr<transport> dropped = std::move(transport_);
  dropped->close();
  buffers_.reset();
  state_ = state::down;
  write_in_flight_ = false;
  output_.clear();
  timeout_timer_.cancel();
  timer_armed_ = false;
  // Like hiredis, every command in flight fails; not inside this call, which may come from one
  // of their own handlers.
  auto awaited = std::move(awaited_);
  awaited_.clear();
  for (auto& entry : awaited) {
    boost::asio::post(executor_, [done = std::move(entry.done), why]() mutable {
      done(command_result{.failure = why});
    });
  }
  fail_waiting(why);
  if (link_observer_) link_observer_(&why);
  if (was_ready && on_down_) on_down_();
}

}  // namespace dlock::redis::detail
