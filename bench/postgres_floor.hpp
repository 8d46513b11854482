// The PostgreSQL side of dlock-bench: the raw libpq floor and what many held locks cost.
#pragma once

#include <memory>
#include <string>

namespace dlock_bench {

/// One raw libpq connection, timing the statements an uncontended grant needs.
class raw_libpq {
 public:
  explicit raw_libpq(const std::string& url);
  ~raw_libpq();
  raw_libpq(const raw_libpq&) = delete;
  raw_libpq& operator=(const raw_libpq&) = delete;

  /// Microseconds of `SELECT pg_try_advisory_lock(k)` + `SELECT pg_advisory_unlock(k)` (the
  /// floor), or with `fenced`, the grant as dlock sends it:
  /// `SELECT CASE WHEN pg_try_advisory_lock(k) THEN nextval('dlock_fencing') END`.
  double grant_and_release_us(bool fenced);
  /// Microseconds of one `SELECT 1`.
  double round_trip_us();
  /// Sessions the server has for clients that set application_name `application`.
  int server_sessions(const std::string& application);

 private:
  struct connection;
  std::unique_ptr<connection> connection_;
};

}  // namespace dlock_bench
