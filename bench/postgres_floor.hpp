// The PostgreSQL side of dlock-bench: the raw libpq floors and what many held locks cost.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlock_bench {

/// What dlock sends for one lock, built by the backend's own sql.hpp (fencing sequence
/// dlock_fencing, owners' table dlock_owners: the defaults), or the bare advisory-lock calls.
struct lock_statements {
  std::string grant;     ///< the uncontended attempt
  std::string release;   ///< the unlock (and, recorded, the owner row's delete)
  std::string waiting;   ///< sent before a blocking wait (the waiter's row); may be empty
  std::string wait;      ///< the blocking wait
};
lock_statements dlock_statements(const std::string& name);
lock_statements bare_statements(const std::string& name);

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
  /// Microseconds of `statements.grant` + `statements.release`, one round trip each.
  double grant_and_release_us(const lock_statements& statements);
  /// Microseconds of one `SELECT 1`.
  double round_trip_us();
  /// Sessions the server has for clients that set application_name `application`.
  int server_sessions(const std::string& application);

 private:
  struct connection;
  std::unique_ptr<connection> connection_;
};

/// The raw handoff floor: two connections, each on a thread of its own, take turns on one
/// advisory lock. The holder waits until the other connection is blocked in `statements.wait`
/// at the server (pg_locks), sleeps `settle` (as dlock's handoff does before its release),
/// then sends `statements.release`; each sample is the time from sending the release to the
/// waiter's statement returning, in microseconds. With no settle the holder polls pg_locks up
/// to the release, which keeps its thread and its server process running and the machine's
/// cores awake (the hot floor).
std::vector<double> raw_handoff_us(const std::string& url, int rounds,
                                   const lock_statements& statements,
                                   std::chrono::microseconds settle);

/// For dlock's hot handoff (bench_support.hpp): whether a session waits at the server for the
/// lock `name`. Connects on its first call, in the process that calls it (so make one per
/// handoff run, after which the run forks).
std::function<bool()> waiter_blocked(const std::string& url, const std::string& name);

}  // namespace dlock_bench
