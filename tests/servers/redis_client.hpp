// A minimal synchronous Redis client over hiredis for the test-server tests: one connection, one
// command at a time, every wait bounded by a timeout.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_servers.hpp"

struct redisContext;

namespace support {

class redis_connection {
 public:
  /// Connects to `at`; connecting and every later command give up after `timeout`.
  /// Throws std::runtime_error naming the endpoint when the connection fails.
  explicit redis_connection(const host_port& at,
                            std::chrono::milliseconds timeout = std::chrono::seconds(2));
  ~redis_connection();
  redis_connection(redis_connection&&) noexcept;
  redis_connection& operator=(redis_connection&&) noexcept;

  /// Sends one command; returns the reply as text (integers in decimal, errors as their
  /// message), or nullopt when the connection failed or the reply did not come in time.
  /// After a nullopt the connection is unusable.
  std::optional<std::string> command(const std::vector<std::string>& arguments);

  /// Sends one command whose reply is an array (KEYS, ZRANGE, PUBSUB CHANNELS); returns its
  /// elements as text, nested arrays flattened in order, or nullopt as command() does. A reply
  /// that is not an array is one element.
  std::optional<std::vector<std::string>> command_elements(
      const std::vector<std::string>& arguments);

  /// What failed last, e.g. "Resource temporarily unavailable" after a timeout.
  std::string error() const;

 private:
  struct context_deleter {
    void operator()(redisContext* context) const;
  };
  std::unique_ptr<redisContext, context_deleter> context_;
};

/// Whether a new connection to `at` gets PONG within `timeout`.
bool redis_answers_ping(const host_port& at,
                        std::chrono::milliseconds timeout = std::chrono::seconds(1));

/// The value of `field` ("run_id") in the text of Redis's INFO command, or "" if absent.
std::string redis_info_field(const std::string& info, const std::string& field);

}  // namespace support
