// Private to the SQL backends (dlock::postgres and dlock::mysql): one pooled connection and the
// books kept on it, the Session of session_books, pooled_lease and session_keepalive.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <dlock/core/backend/lease.hpp>

#include "session_grants.hpp"

namespace dlock {

/// A pooled connection and what it holds. `Connection` is the backend's connection (see
/// session_books for what it must offer); `Grant` has a `std::string resource`, what a session
/// holds at most once, and a `std::stop_source lost`. Touched only on the pool's thread.
template <typename Connection, typename Grant>
struct sql_session {
  using grant = Grant;

  std::shared_ptr<Connection> connection;
  session_grants<grant> grants;
  // Resources of attempts sent but not answered yet: the servers' session-level locks
  // (advisory locks, named locks) are re-entrant per session, so a second attempt of one of
  // them on this session would be granted too.
  std::multiset<std::string> attempting;
  bool reserved = false;  // a waiting acquire runs on it
  // When the unanswered keepalive probe was sent; empty when none is outstanding.
  std::optional<std::chrono::steady_clock::time_point> probe_sent;
  // Until when its grants are known valid (session_keepalive::validity_of_grant): shared with
  // their leases, moved on by every probe the server answers on it.
  std::shared_ptr<grant_validity> validity =
      std::make_shared<grant_validity>(std::chrono::steady_clock::time_point::min());

  /// Holds `resource` or has an attempt of it in flight: two lookups, whatever it holds.
  bool holds_or_attempts(const std::string& resource) const {
    return attempting.contains(resource) || grants.holds(resource);
  }
};

}  // namespace dlock
