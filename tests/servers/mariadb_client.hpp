// A minimal synchronous MariaDB client over Connector/C for tests: one connection, one
// statement at a time, every wait bounded by a timeout. Tests use it as another client would
// (plain GET_LOCK, KILL, the process list), never through dlock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct st_mysql;

namespace support {

using sql_rows = std::vector<std::vector<std::optional<std::string>>>;

class mariadb_client {
 public:
  /// Connects to `url` (mysql://user:pw@host:port/db); connecting and every statement give up
  /// after `timeout`. Throws std::runtime_error naming the endpoint when it fails.
  explicit mariadb_client(const std::string& url,
                          std::chrono::seconds timeout = std::chrono::seconds(5));
  ~mariadb_client();
  mariadb_client(const mariadb_client&) = delete;
  mariadb_client& operator=(const mariadb_client&) = delete;

  /// Runs one statement; returns its rows (none for a statement without a result).
  /// Throws std::runtime_error with the server's message when it fails.
  sql_rows query(const std::string& sql);
  /// The first column of the first row of `sql` ("" for NULL or no row).
  std::string value(const std::string& sql);

  /// This connection's id (CONNECTION_ID()).
  std::uint64_t id() const;

 private:
  st_mysql* mysql_ = nullptr;
};

}  // namespace support
