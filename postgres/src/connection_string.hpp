// Private to dlock::postgres: what the backend makes of options.connection_string.
#pragma once

#include <string>
#include <vector>

#include <dlock/postgres/options.hpp>

namespace dlock::postgres::detail {

/// Parses a libpq connection string; returns "host:port/dbname" for messages (never the
/// password). Throws std::invalid_argument naming connection_string when libpq rejects it.
std::string describe_connection_string(const std::string& connection_string);

/// The parameters every session connects with (PQconnectStartParams, expand_dbname on): TCP
/// keepalives at the keepalive period, then the connection string, whose own settings win.
/// Not copyable: the pointer arrays point into the strings it holds.
class connection_parameters {
 public:
  explicit connection_parameters(const options& opts);
  connection_parameters(const connection_parameters&) = delete;
  connection_parameters& operator=(const connection_parameters&) = delete;

  /// NULL-terminated, as libpq wants them.
  const char* const* keywords() const noexcept { return keyword_pointers_.data(); }
  const char* const* values() const noexcept { return value_pointers_.data(); }

 private:
  std::vector<std::string> keywords_, values_;
  std::vector<const char*> keyword_pointers_, value_pointers_;
};

}  // namespace dlock::postgres::detail
