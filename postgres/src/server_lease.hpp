// Private to dlock::postgres: the server's side of the lease, the per-session settings that
// make PostgreSQL free a silent client's locks by itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <dlock/postgres/options.hpp>

namespace dlock::postgres::detail {

/// What every session sets on the server before its first statement.
///
/// TCP alone cannot tell the server that a client is gone: a proxy, a NAT or a stopped process
/// keeps answering keepalives. idle_session_timeout can: the client's keepalive makes a round
/// trip every half period on every session, so a session that goes idle for `lease` was left
/// by its client, and the server ends it, freeing its advisory locks. A session waiting in
/// pg_advisory_lock is not idle: lock_timeout ends a wait at its deadline, then the lease
/// runs; a wait without deadline is dropped once the server's TCP (tcp_user_timeout,
/// keepalives) finds the connection dead, which client_connection_check_interval makes the
/// waiting backend notice; a grant to a client that is gone leaves the session idle, so the
/// lease frees it.
struct server_lease {
  std::chrono::milliseconds idle_session_timeout;
  std::chrono::milliseconds tcp_user_timeout;
  std::chrono::seconds keepalives_idle;
  std::chrono::seconds keepalives_interval;
  std::uint32_t keepalives_count;
  std::chrono::milliseconds client_connection_check_interval;

  /// Derives the fields `opts` leaves at zero from its keepalive, and checks that no server
  /// bound is shorter than the client's lost bound (1.5 × keepalive). Throws
  /// std::invalid_argument naming the field. Requires: opts.keepalive positive.
  static server_lease from(const options& opts);

  /// The SET statements of the lease, one simple query; a server that rejects them cannot
  /// keep the lease (PostgreSQL 13 and older).
  std::string sql() const;
  /// The SET of client_connection_check_interval, which only helps (the server drops a
  /// closed client's wait sooner) and which servers on some platforms reject.
  std::string optional_sql() const;
};

}  // namespace dlock::postgres::detail
