#include "sync_connections.hpp"

#include <cerrno>

#include <hiredis/hiredis.h>

namespace dlock::redis::detail {

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

}  // namespace dlock::redis::detail
