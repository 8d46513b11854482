// Private to dlock::redis: a server's reply copied out of hiredis, and a command's outcome.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <dlock/core/detail/unique_function.hpp>

struct redisReply;

namespace dlock::redis::detail {

/// A reply copied out of hiredis (which frees its own after the callback).
struct reply {
  enum class kind { string, array, integer, nil, status, error };
  kind type = kind::nil;
  long long integer = 0;
  std::string text;             ///< string, status and error replies
  std::vector<reply> elements;  ///< arrays
  bool is_error() const noexcept { return type == kind::error; }
  /// An array of two integers, the shape of the acquire and count scripts' answers.
  bool is_integer_pair() const noexcept {
    return type == kind::array && elements.size() == 2 && elements[0].type == kind::integer &&
           elements[1].type == kind::integer;
  }
};

/// A command's outcome: `failure` says why no reply came (connection refused or lost, no reply
/// in time, handshake refused); otherwise `value` is the server's reply, which may be an error.
struct command_result {
  std::optional<std::string> failure;
  reply value;
};

using reply_handler = dlock::detail::unique_function<void(command_result)>;

/// Copies a hiredis reply.
reply copy_reply(const redisReply& from);

}  // namespace dlock::redis::detail
