// Private to dlock::mysql: one pooled connection and the books kept on it.
#pragma once

#include <stop_token>
#include <string>

#include "connection.hpp"
#include "sql_session.hpp"

namespace dlock::mysql::detail {

/// A hold of a name on one connection.
struct mysql_grant {
  std::string resource;     // what the pool keeps apart: one hold of a name per connection
  std::string server_name;  // the named lock the keepalive asks IS_USED_LOCK about
  std::stop_source lost;
};

using mysql_session = sql_session<mariadb_connection, mysql_grant>;

}  // namespace dlock::mysql::detail
