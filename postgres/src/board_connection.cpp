#include "board_connection.hpp"

#include <algorithm>

namespace dlock::postgres::detail {

board_connection::board_connection(const options& opts, std::string endpoint,
                                   std::string first_sql)
    : parameters_(opts), endpoint_(std::move(endpoint)), first_sql_(std::move(first_sql)),
      timeout_(std::max(opts.connect_timeout, opts.release_timeout)) {}

board_connection::~board_connection() { drop(); }

void board_connection::drop() noexcept {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
}

query_result board_connection::run(const std::string& sql,
                                   const std::vector<board_parameter>& parameters) {
  std::lock_guard lock(mutex_);
  // A session the server ended while idle (idle_session_timeout, a restart) fails its next
  // statement at once: one more try on a fresh one.
  for (int attempt = 0;; ++attempt) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    const bool was_open = conn_ != nullptr;
    std::string why;
    if (!conn_ && !connect(deadline, why)) {
      query_result failed;
      failed.connection_broken = true;
      failed.message = std::move(why);
      return failed;
    }
    query_result r = send(sql, parameters, deadline);
    if (!r.connection_broken || !was_open || attempt > 0) return r;
  }
}

bool board_connection::connect(std::chrono::steady_clock::time_point deadline, std::string& why) {
  conn_ = connect_blocking(parameters_, endpoint_, deadline, why);
  if (!conn_) return false;
  if (!first_sql_.empty()) {
    query_result r = send(first_sql_, {}, deadline);
    // 42P07/23505: another client created it at the same moment.
    if (!r.ok() && r.sqlstate != "42P07" && r.sqlstate != "23505") {
      why = "cannot create the table it needs (" + r.message + ")";
      drop();
      return false;
    }
  }
  return true;
}

query_result board_connection::send(const std::string& sql,
                                    const std::vector<board_parameter>& parameters,
                                    std::chrono::steady_clock::time_point deadline) {
  query_result r = send_blocking(conn_, endpoint_, sql, parameters, deadline);
  if (r.connection_broken) drop();
  return r;
}

}  // namespace dlock::postgres::detail
