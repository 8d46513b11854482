// Private to dlock::postgres: what a pg_advisory_lock wait's answer tells the SQL wait machine,
// for the pooled wait (acquire.cpp) and the wait on the caller's thread (caller_wait.cpp).
#pragma once

#include "pg_connection.hpp"
#include "sql_wait_machine.hpp"

namespace dlock::postgres::detail {

/// 55P03 is lock_timeout, 57014 a cancel (ours or not): either can race a grant. A deadlock
/// (40P01) took nothing; any other failure may have come after the lock was taken.
inline dlock::detail::sql_wait_machine::event wait_answer(const query_result& r) {
  using event = dlock::detail::sql_wait_machine::event;
  if (r.connection_broken) return event::connection_lost;
  if (r.ok()) return event::granted;
  if (r.sqlstate == "55P03" || r.sqlstate == "57014") return event::timed_out;
  if (r.sqlstate == "40P01") return event::failed_cleanly;
  return event::failed;
}

}  // namespace dlock::postgres::detail
