// Private to dlock::postgres: sessions that the callers' threads drive themselves, for the
// uncontended attempt and its release (inline_attempt.cpp) and a lock's wait (caller_wait.cpp),
// so that none waits for the provider's thread. The pool and its keepalive are the SQL
// backends' caller_session_pool; this is what it needs of libpq.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <libpq-fe.h>

#include "caller_session_pool.hpp"
#include "connection_string.hpp"
#include "pg_connection.hpp"

namespace dlock::postgres::detail {

/// libpq for caller_session_pool: a session uses libpq's non-blocking calls, driven by poll(2)
/// under a deadline on a caller's thread and by waits on its socket on the io thread.
struct pg_caller_driver {
  using connection = PGconn*;
  using result = query_result;
  struct grant {
    std::string resource;
    std::stop_source lost;
  };
  struct session_extras {
    int pid = 0;                // the server process (pg_locks.pid)
    std::string backend_start;  // pg_stat_activity.backend_start as text: a cancel's guard
    // Set while a cancel request of a wait on this session is on its way (send_cancel).
    std::shared_ptr<std::atomic<bool>> cancelling = std::make_shared<std::atomic<bool>>(false);
  };
  /// Runs the session's first statements (the server lease's settings) on a new connection by
  /// the deadline, and reads the session's backend_start; returns why it cannot be used, empty
  /// when it can.
  using preparer = std::function<std::string(
      PGconn*, std::chrono::steady_clock::time_point deadline, std::string& backend_start)>;

  boost::asio::any_io_executor executor;
  std::shared_ptr<const connection_parameters> parameters;
  std::string endpoint;
  preparer prepare;

  PGconn* open(std::chrono::steady_clock::time_point deadline, std::string& why, int wakeup,
               session_extras& extras);
  query_result exchange(PGconn* conn, const std::string& sql,
                        std::chrono::steady_clock::time_point deadline) const;
  void exchange_on_io(const std::shared_ptr<caller_session<pg_caller_driver>>& session,
                      std::string sql, std::function<void(query_result)> done) const;
  /// A session keeps its advisory locks for its life, which the watch and a probe's answer
  /// vouch for: the probe asks nothing more.
  std::string probe_sql(const std::vector<const grant*>& /*grants*/) const { return "SELECT 1"; }
  static bool still_held(const query_result& /*r*/, std::size_t /*index*/) { return true; }

  static int socket(PGconn* conn) { return PQsocket(conn); }
  /// False when an idle session whose socket became readable was ended by the server; reads
  /// without blocking.
  static bool still_open(PGconn* conn) {
    return PQconsumeInput(conn) && PQstatus(conn) != CONNECTION_BAD;
  }
  static void close(PGconn* conn) noexcept { PQfinish(conn); }
};

using caller_sessions = caller_session_pool<pg_caller_driver>;
using caller_session = caller_sessions::session;

}  // namespace dlock::postgres::detail
