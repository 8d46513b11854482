// Private to dlock::postgres: a blocking session of its own for the election board and the
// inspector, whose calls come from callers' threads and, for the board, from the provider's io
// thread (an async campaign's proclaim), so they cannot wait for the io thread's pool.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <libpq-fe.h>

#include "blocking_libpq.hpp"
#include "connection_string.hpp"
#include "pg_connection.hpp"

namespace dlock::postgres::detail {

/// One libpq connection, opened on first use and again after it broke, whose statements
/// each wait at most `timeout` (connect included). Thread-safe: one statement at a time.
class board_connection {
 public:
  board_connection(const options& opts, std::string endpoint, std::string first_sql);
  ~board_connection();
  board_connection(const board_connection&) = delete;
  board_connection& operator=(const board_connection&) = delete;

  /// Runs `sql` with `parameters` ($1, $2, ...), results in binary (read text columns as
  /// their bytes). Returns the result; a failed statement fills sqlstate/message, and a
  /// connection that cannot be reached or answers too late sets connection_broken.
  query_result run(const std::string& sql, const std::vector<board_parameter>& parameters);

 private:
  bool connect(std::chrono::steady_clock::time_point deadline, std::string& why);
  query_result send(const std::string& sql, const std::vector<board_parameter>& parameters,
                    std::chrono::steady_clock::time_point deadline);
  void drop() noexcept;

  std::mutex mutex_;
  connection_parameters parameters_;
  std::string endpoint_;
  std::string first_sql_;
  std::chrono::nanoseconds timeout_;
  PGconn* conn_ = nullptr;
};

}  // namespace dlock::postgres::detail
