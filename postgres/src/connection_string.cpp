#include "connection_string.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <libpq-fe.h>

namespace dlock::postgres::detail {

namespace {

struct enumerated {
  const char* keyword;
  std::vector<std::string> values;
};

// The parameters whose values libpq checks only when it connects: a wrong one would surface
// as a connection_error of the first acquire, so they are checked here, against libpq 15's
// lists (and those of later versions, for the keywords they add).
const std::vector<enumerated>& enumerated_parameters() {
  static const std::vector<enumerated> parameters{
      {"sslmode", {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}},
      {"gssencmode", {"disable", "prefer", "require"}},
      {"channel_binding", {"disable", "prefer", "require"}},
      {"target_session_attrs",
       {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}},
      {"ssl_min_protocol_version", {"", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}},
      {"ssl_max_protocol_version", {"", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}},
      {"sslcertmode", {"disable", "allow", "require"}},
      {"load_balance_hosts", {"disable", "random"}},
      {"sslnegotiation", {"postgres", "direct"}}};
  return parameters;
}

constexpr const char* integer_parameters[] = {"connect_timeout", "keepalives",
                                              "keepalives_idle", "keepalives_interval",
                                              "keepalives_count", "tcp_user_timeout"};

bool is_integer(const std::string& text) {
  std::size_t at = text.find_first_not_of(' ');
  if (at != std::string::npos && (text[at] == '-' || text[at] == '+')) ++at;
  const std::size_t digits_end = text.find_first_not_of("0123456789", at);
  if (at == std::string::npos || digits_end == at) return false;
  return digits_end == std::string::npos || text.find_first_not_of(' ', digits_end) ==
                                                std::string::npos;
}

// Throws std::invalid_argument naming the first parameter whose value libpq would reject.
// Values of these parameters are no secrets, so the message quotes them.
void check_values(const PQconninfoOption* parsed) {
  for (const PQconninfoOption* option = parsed; option->keyword; ++option) {
    if (!option->val) continue;
    const std::string keyword = option->keyword, value = option->val;
    for (const auto& [name, allowed] : enumerated_parameters()) {
      if (keyword != name || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) {
        continue;
      }
      std::string list;
      for (const auto& one : allowed) {
        if (!one.empty()) list += (list.empty() ? "" : ", ") + one;
      }
      throw std::invalid_argument("dlock: postgres: options.connection_string: " + keyword +
                                  " '" + value + "' is not one of " + list);
    }
    for (const char* name : integer_parameters) {
      if (keyword == name && !is_integer(value)) {
        throw std::invalid_argument("dlock: postgres: options.connection_string: " + keyword +
                                    " '" + value + "' is not an integer");
      }
    }
  }
}

}  // namespace

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
  try {
    check_values(parsed);
  } catch (...) {
    PQconninfoFree(parsed);
    throw;
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
