#include "redis_client.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <stdexcept>

namespace support {

namespace {

timeval to_timeval(std::chrono::milliseconds duration) {
  return timeval{.tv_sec = static_cast<time_t>(duration.count() / 1000),
                 .tv_usec = static_cast<suseconds_t>(duration.count() % 1000 * 1000)};
}

}  // namespace

void redis_connection::context_deleter::operator()(redisContext* context) const {
  redisFree(context);
}

redis_connection::redis_connection(const host_port& at, std::chrono::milliseconds timeout)
    : context_(redisConnectWithTimeout(at.host.c_str(), at.port, to_timeval(timeout))) {
  const std::string endpoint = at.host + ":" + std::to_string(at.port);
  if (!context_) throw std::runtime_error("redis " + endpoint + ": out of memory");
  if (context_->err != 0) {
    throw std::runtime_error("redis " + endpoint + ": connect failed: " + context_->errstr);
  }
  if (redisSetTimeout(context_.get(), to_timeval(timeout)) != REDIS_OK) {
    throw std::runtime_error("redis " + endpoint + ": setting the timeout failed");
  }
}

redis_connection::~redis_connection() = default;
redis_connection::redis_connection(redis_connection&&) noexcept = default;
redis_connection& redis_connection::operator=(redis_connection&&) noexcept = default;

namespace {

using reply_ptr = std::unique_ptr<redisReply, void (*)(void*)>;

reply_ptr send(redisContext* context, const std::vector<std::string>& arguments) {
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const auto& argument : arguments) {
    pointers.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  void* raw = redisCommandArgv(context, static_cast<int>(arguments.size()), pointers.data(),
                               lengths.data());
  return reply_ptr(static_cast<redisReply*>(raw), &freeReplyObject);
}

std::string text_of(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(reply.str, reply.len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(reply.integer);
    default:
      return std::string();
  }
}

void flatten(const redisReply& reply, std::vector<std::string>& elements) {
  if (reply.type != REDIS_REPLY_ARRAY) {
    elements.push_back(text_of(reply));
    return;
  }
  for (std::size_t i = 0; i < reply.elements; ++i) flatten(*reply.element[i], elements);
}

}  // namespace

std::optional<std::string> redis_connection::command(const std::vector<std::string>& arguments) {
  const reply_ptr reply = send(context_.get(), arguments);
  if (!reply) return std::nullopt;
  return text_of(*reply);
}

std::optional<std::vector<std::string>> redis_connection::command_elements(
    const std::vector<std::string>& arguments) {
  const reply_ptr reply = send(context_.get(), arguments);
  if (!reply) return std::nullopt;
  std::vector<std::string> elements;
  flatten(*reply, elements);
  return elements;
}

std::string redis_connection::error() const { return context_->errstr; }

bool redis_answers_ping(const host_port& at, std::chrono::milliseconds timeout) {
  try {
    redis_connection connection(at, timeout);
    return connection.command({"PING"}) == "PONG";
  } catch (const std::runtime_error&) {
    return false;
  }
}

std::string redis_info_field(const std::string& info, const std::string& field) {
  const std::string key = "\n" + field + ":";
  const auto start = ("\n" + info).find(key);
  if (start == std::string::npos) return "";
  const auto value = start + key.size() - 1;
  return info.substr(value, info.find_first_of("\r\n", value) - value);
}

}  // namespace support
