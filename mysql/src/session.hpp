// Private to dlock::mysql: one pooled connection and the books kept on it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

#include "connection.hpp"
#include "session_grants.hpp"

namespace dlock::mysql::detail {

/// A pooled connection and what it holds. Touched only on the io thread.
struct mysql_session {
  std::shared_ptr<mariadb_connection> connection;
  struct grant {
    std::string resource;     // what the pool keeps apart: one hold of a name per connection
    std::string server_name;  // the named lock the keepalive asks IS_USED_LOCK about
    std::stop_source lost;
  };
  session_grants<grant> grants;
  // Resources of attempts sent but not answered yet: named locks are re-entrant per
  // connection, so a second attempt of one of them on this connection would be granted too.
  std::multiset<std::string> attempting;
  bool reserved = false;  // a waiting acquire runs on it
  // When the unanswered keepalive probe was sent; empty when none is outstanding.
  std::optional<std::chrono::steady_clock::time_point> probe_sent;

  /// Holds `resource` or has an attempt of it in flight: two lookups, whatever it holds.
  bool holds_or_attempts(const std::string& resource) const {
    return attempting.contains(resource) || grants.holds(resource);
  }
};

}  // namespace dlock::mysql::detail
