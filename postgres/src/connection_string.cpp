#include "connection_string.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <libpq-fe.h>

namespace dlock::postgres::detail {

std::string describe_connection_string(const std::string& connection_string) {
  if (connection_string.empty()) {
    throw std::invalid_argument("dlock: postgres: options.connection_string is empty");
  }
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(connection_string.c_str(), &error);
  if (!parsed) {
    // libpq's message may quote pieces of the string, which may hold a password.
    if (error) PQfreemem(error);
    throw std::invalid_argument(
        "dlock: postgres: options.connection_string is not a valid libpq URL or key=value "
        "connection string");
  }
  std::string host, port, dbname, user;
  for (PQconninfoOption* option = parsed; option->keyword; ++option) {
    if (!option->val) continue;
    const std::string keyword = option->keyword;
    if (keyword == "host" || (keyword == "hostaddr" && host.empty())) host = option->val;
    if (keyword == "port") port = option->val;
    if (keyword == "dbname") dbname = option->val;
    if (keyword == "user") user = option->val;
  }
  PQconninfoFree(parsed);
  std::string endpoint = host.empty() ? "localhost" : host;
  if (!port.empty()) endpoint += ":" + port;
  if (!dbname.empty()) endpoint += "/" + dbname;
  return (user.empty() ? "" : user + "@") + endpoint;
}

connection_parameters::connection_parameters(const options& opts) {
  // TCP keepalives at the keepalive period bound how long a wait on a silent network lasts
  // (the wait's session runs no keepalive queries). Before dbname, so that the connection
  // string's own settings win.
  const auto tcp_seconds = std::to_string(std::max<long long>(
      1, std::chrono::duration_cast<std::chrono::seconds>(opts.keepalive).count()));
  keywords_ = {"keepalives_idle", "keepalives_interval", "keepalives_count", "dbname",
               "fallback_application_name"};
  values_ = {tcp_seconds, tcp_seconds, "3", opts.connection_string, "dlock"};
  for (std::size_t i = 0; i < keywords_.size(); ++i) {
    keyword_pointers_.push_back(keywords_[i].c_str());
    value_pointers_.push_back(values_[i].c_str());
  }
  keyword_pointers_.push_back(nullptr);
  value_pointers_.push_back(nullptr);
}

}  // namespace dlock::postgres::detail
