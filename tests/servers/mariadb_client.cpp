#include "mariadb_client.hpp"

#include <stdexcept>

#include <mysql.h>

#include "test_servers.hpp"

namespace support {

namespace {

// user:pw@ and /db of a mysql:// URL; endpoint_hosts() gives host and port.
std::pair<std::string, std::string> user_and_password(const std::string& url) {
  const auto start = url.find("://") + 3;
  const auto at = url.find('@', start);
  if (at == std::string::npos) return {};
  const std::string credentials = url.substr(start, at - start);
  const auto colon = credentials.find(':');
  if (colon == std::string::npos) return {credentials, ""};
  return {credentials.substr(0, colon), credentials.substr(colon + 1)};
}

std::string database(const std::string& url) {
  const auto slash = url.find('/', url.find("://") + 3);
  if (slash == std::string::npos) return "";
  return url.substr(slash + 1, url.find('?', slash) - slash - 1);
}

}  // namespace

mariadb_client::mariadb_client(const std::string& url, std::chrono::seconds timeout) {
  const auto hosts = endpoint_hosts(url);
  if (hosts.size() != 1) throw std::runtime_error("mariadb_client: one host expected in " + url);
  const auto [user, password] = user_and_password(url);
  mysql_ = mysql_init(nullptr);
  const unsigned seconds = static_cast<unsigned>(timeout.count());
  mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &seconds);
  mysql_options(mysql_, MYSQL_OPT_READ_TIMEOUT, &seconds);
  mysql_options(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &seconds);
  if (!mysql_real_connect(mysql_, hosts[0].host.c_str(), user.c_str(), password.c_str(),
                          database(url).c_str(), static_cast<unsigned>(hosts[0].port), nullptr,
                          0)) {
    const std::string error = mysql_error(mysql_);
    mysql_close(mysql_);
    throw std::runtime_error("mariadb_client: cannot connect to " + hosts[0].host + ":" +
                             std::to_string(hosts[0].port) + ": " + error);
  }
}

mariadb_client::~mariadb_client() { mysql_close(mysql_); }

sql_rows mariadb_client::query(const std::string& sql) {
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) {
    throw std::runtime_error("mariadb_client: " + sql.substr(0, 200) + ": " + mysql_error(mysql_));
  }
  sql_rows rows;
  MYSQL_RES* result = mysql_store_result(mysql_);
  if (!result) {
    if (mysql_errno(mysql_) != 0) throw std::runtime_error(std::string("mariadb_client: ") + mysql_error(mysql_));
    return rows;
  }
  const unsigned columns = mysql_num_fields(result);
  while (MYSQL_ROW row = mysql_fetch_row(result)) {
    const unsigned long* lengths = mysql_fetch_lengths(result);
    auto& out = rows.emplace_back();
    for (unsigned i = 0; i < columns; ++i) {
      if (row[i]) {
        out.emplace_back(std::string(row[i], lengths[i]));
      } else {
        out.emplace_back(std::nullopt);
      }
    }
  }
  mysql_free_result(result);
  return rows;
}

std::string mariadb_client::value(const std::string& sql) {
  const auto rows = query(sql);
  if (rows.empty() || rows[0].empty() || !rows[0][0]) return "";
  return *rows[0][0];
}

std::uint64_t mariadb_client::id() const { return mysql_thread_id(mysql_); }

}  // namespace support
