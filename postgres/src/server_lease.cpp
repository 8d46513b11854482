#include "server_lease.hpp"

#include <climits>
#include <stdexcept>

namespace dlock::postgres::detail {

namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

std::string invalid(const char* field, const std::string& what) {
  return std::string("dlock: postgres: options.") + field + " " + what;
}

std::string in_ms(nanoseconds value) {
  return std::to_string(std::chrono::ceil<milliseconds>(value).count()) + " ms";
}

// A duration field: zero takes `fallback`; negative and past INT_MAX `Unit`s (the most a
// server setting holds) are errors.
template <typename Unit>
Unit setting(nanoseconds value, nanoseconds fallback, const char* field) {
  if (value < nanoseconds::zero()) throw std::invalid_argument(invalid(field, "is negative"));
  const auto rounded = std::chrono::ceil<Unit>(value == nanoseconds::zero() ? fallback : value);
  if (rounded.count() > INT_MAX) {
    throw std::invalid_argument(invalid(field, "is longer than the server can hold"));
  }
  return rounded;
}

}  // namespace

server_lease server_lease::from(const options& opts) {
  const nanoseconds lost_bound = opts.keepalive * 3 / 2;
  auto at_least_lost_bound = [&](nanoseconds value, const char* field) {
    if (value < lost_bound) {
      throw std::invalid_argument(invalid(
          field, "(" + in_ms(value) + ") must be at least 1.5 × keepalive (" +
                     in_ms(lost_bound) +
                     "): the server would free a silent holder's locks before the holder "
                     "marks them lost"));
    }
  };
  server_lease lease{};
  lease.idle_session_timeout =
      setting<milliseconds>(opts.server_lease, 2 * opts.keepalive, "server_lease");
  at_least_lost_bound(lease.idle_session_timeout, "server_lease");
  lease.tcp_user_timeout = setting<milliseconds>(opts.server_tcp_user_timeout,
                                                 lease.idle_session_timeout,
                                                 "server_tcp_user_timeout");
  at_least_lost_bound(lease.tcp_user_timeout, "server_tcp_user_timeout");
  const nanoseconds period = std::max<nanoseconds>(opts.keepalive, seconds(1));
  lease.keepalives_idle =
      setting<seconds>(opts.server_keepalives_idle, period, "server_keepalives_idle");
  lease.keepalives_interval =
      setting<seconds>(opts.server_keepalives_interval, period, "server_keepalives_interval");
  lease.keepalives_count = opts.server_keepalives_count == 0 ? 3 : opts.server_keepalives_count;
  if (lease.keepalives_count > INT_MAX) {
    throw std::invalid_argument(invalid("server_keepalives_count", "is too large"));
  }
  at_least_lost_bound(lease.keepalives_idle + lease.keepalives_interval * lease.keepalives_count,
                      "server_keepalives_idle + server_keepalives_interval × "
                      "server_keepalives_count");
  lease.client_connection_check_interval =
      setting<milliseconds>(opts.keepalive, opts.keepalive, "keepalive");
  return lease;
}

std::string server_lease::sql() const {
  return "SET idle_session_timeout = " + std::to_string(idle_session_timeout.count()) +
         "; SET tcp_user_timeout = " + std::to_string(tcp_user_timeout.count()) +
         "; SET tcp_keepalives_idle = " + std::to_string(keepalives_idle.count()) +
         "; SET tcp_keepalives_interval = " + std::to_string(keepalives_interval.count()) +
         "; SET tcp_keepalives_count = " + std::to_string(keepalives_count);
}

std::string server_lease::optional_sql() const {
  return "SET client_connection_check_interval = " +
         std::to_string(client_connection_check_interval.count());
}

}  // namespace dlock::postgres::detail
