// Private to dlock::postgres: one pooled session and the books kept on it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

#include "pg_connection.hpp"
#include "session_grants.hpp"

namespace dlock::postgres::detail {

/// A pooled connection and what it holds. Touched only on the io thread.
struct pg_session {
  std::shared_ptr<pg_connection> connection;
  struct grant {
    std::string resource;
    std::stop_source lost;
  };
  session_grants<grant> grants;
  // Resources of attempts sent but not answered yet: advisory locks are re-entrant per session,
  // so a second attempt of one of them on this session would be granted too.
  std::multiset<std::string> attempting;
  bool reserved = false;                  // a waiting acquire runs on it
  // When the unanswered keepalive probe was sent; empty when none is outstanding.
  std::optional<std::chrono::steady_clock::time_point> probe_sent;

  /// Holds `resource` or has an attempt of it in flight: two lookups, whatever it holds.
  bool holds_or_attempts(const std::string& resource) const {
    return attempting.contains(resource) || grants.holds(resource);
  }
};

}  // namespace dlock::postgres::detail
