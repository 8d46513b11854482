// Private to dlock::mysql: connections that the callers' threads drive themselves, for the
// uncontended attempt and its release (inline_attempt.cpp), so that neither waits for the
// provider's thread. The pool and its keepalive are the SQL backends' caller_session_pool;
// this is what it needs of Connector/C.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/mysql/options.hpp>

#include "caller_session_pool.hpp"
#include "connection.hpp"
#include "session.hpp"

struct st_mysql;

namespace dlock::mysql::detail {

/// Connector/C for caller_session_pool: a connection uses the non-blocking calls, driven by
/// poll(2) under a deadline on a caller's thread and by waits on its socket on the io thread.
struct mariadb_caller_driver {
  using connection = st_mysql*;
  using grant = mysql_grant;
  using result = query_result;
  /// Runs a new connection's first statements (the server lease) by the deadline; returns why
  /// the connection cannot be used, empty when it can.
  using preparer =
      std::function<std::string(st_mysql*, std::chrono::steady_clock::time_point deadline)>;

  boost::asio::any_io_executor executor;
  options settings;
  std::string endpoint;
  preparer prepare;

  st_mysql* open(std::chrono::steady_clock::time_point deadline, std::string& why);
  query_result exchange(st_mysql* conn, std::string_view sql,
                        std::chrono::steady_clock::time_point deadline) const;
  void exchange_on_io(const std::shared_ptr<caller_session<mariadb_caller_driver>>& session,
                      std::string sql, std::function<void(query_result)> done) const;
  /// CONNECTION_ID() and IS_USED_LOCK() of each grant's lock, in one row.
  std::string probe_sql(const std::vector<const mysql_grant*>& grants) const;
  /// Whether the probe's answer `r` says the session still holds its `index`th grant.
  static bool still_held(const query_result& r, std::size_t index) {
    return r.value(index + 1) == r.value(0);
  }

  static int socket(st_mysql* conn);
  /// False when an idle connection whose socket became readable was ended by the server (an
  /// end of file, or bytes nobody asked for); never blocks.
  static bool still_open(st_mysql* conn);
  static void close(st_mysql* conn) noexcept;
};

using caller_sessions = caller_session_pool<mariadb_caller_driver>;

}  // namespace dlock::mysql::detail
