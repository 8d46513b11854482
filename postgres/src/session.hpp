// Private to dlock::postgres: one pooled session and the books kept on it.
#pragma once

#include <stop_token>
#include <string>

#include "pg_connection.hpp"
#include "sql_session.hpp"

namespace dlock::postgres::detail {

/// A hold of an advisory lock on one session.
struct pg_grant {
  std::string resource;
  std::stop_source lost;
};

using pg_session = sql_session<pg_connection, pg_grant>;

}  // namespace dlock::postgres::detail
