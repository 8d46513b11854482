#include "postgres_floor.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <libpq-fe.h>

#include <dlock/postgres/advisory_key.hpp>

#include "sql.hpp"

namespace dlock_bench {

namespace {

using micros = std::chrono::duration<double, std::micro>;
using dlock::postgres::advisory_key;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One blocking libpq connection.
struct libpq_connection {
  PGconn* handle = nullptr;

  explicit libpq_connection(const std::string& url) : handle(PQconnectdb(url.c_str())) {
    if (PQstatus(handle) != CONNECTION_OK) {
      const std::string why = PQerrorMessage(handle);
      PQfinish(handle);
      throw std::runtime_error("libpq: " + why);
    }
  }
  ~libpq_connection() { PQfinish(handle); }
  libpq_connection(const libpq_connection&) = delete;
  libpq_connection& operator=(const libpq_connection&) = delete;

  std::string run(const std::string& sql) {
    PGresult* result = PQexec(handle, sql.c_str());
    const auto status = PQresultStatus(result);
    const bool ok = status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK;
    std::string value = ok && PQntuples(result) > 0 ? PQgetvalue(result, 0, 0) : "";
    PQclear(result);
    if (!ok) throw std::runtime_error(std::string("libpq: ") + PQerrorMessage(handle));
    return value;
  }

  double timed(std::initializer_list<std::string> statements) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& sql : statements) run(sql);
    return micros(std::chrono::steady_clock::now() - start).count();
  }
};

}  // namespace

lock_statements dlock_statements(const std::string& name) {
  namespace sql = dlock::postgres::detail;
  dlock::acquire_request request;
  request.name = name;
  request.owner = "dlock-bench";
  const auto key = advisory_key::from_name(name);
  const sql::owner_records owners{"dlock_owners"};
  const std::string token = "nextval('dlock_fencing')";
  return {sql::record_grant_sql(sql::attempt_sql(request, key, token), request, key, owners),
          sql::unlock_sql(request, key, "0") + "; " +
              sql::forget_grant_sql(request, key, "0", owners),
          sql::record_waiting_sql(request, key, owners),
          sql::record_grant_sql(sql::wait_sql(request, key, 0, token), request, key, owners)};
}

lock_statements bare_statements(const std::string& name) {
  const std::string key = advisory_key::from_name(name).sql_arguments();
  return {"SELECT pg_try_advisory_lock(" + key + ")", "SELECT pg_advisory_unlock(" + key + ")",
          "", "SELECT pg_advisory_lock(" + key + ")"};
}

struct raw_libpq::connection : libpq_connection {
  using libpq_connection::libpq_connection;
};

raw_libpq::raw_libpq(const std::string& url)
    : connection_(std::make_unique<connection>(url)) {}

raw_libpq::~raw_libpq() = default;

double raw_libpq::grant_and_release_us(bool fenced) {
  if (fenced) {
    return connection_->timed(
        {"SELECT CASE WHEN pg_try_advisory_lock(4242424242) THEN nextval('dlock_fencing') END",
         "SELECT pg_advisory_unlock(4242424242)"});
  }
  return connection_->timed(
      {"SELECT pg_try_advisory_lock(4242424242)", "SELECT pg_advisory_unlock(4242424242)"});
}

double raw_libpq::grant_and_release_us(const lock_statements& statements) {
  return connection_->timed({statements.grant, statements.release});
}

double raw_libpq::round_trip_us() { return connection_->timed({"SELECT 1"}); }

int raw_libpq::server_sessions(const std::string& application) {
  return std::stoi(connection_->run(
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + application + "'"));
}

std::vector<double> raw_handoff_us(const std::string& url, int rounds,
                                   const lock_statements& statements,
                                   std::chrono::microseconds settle) {
  libpq_connection sides[2] = {libpq_connection(url), libpq_connection(url)};
  const int pids[2] = {PQbackendPID(sides[0].handle), PQbackendPID(sides[1].handle)};
  std::atomic<std::int64_t> release_sent_ns{0};
  std::vector<double> samples[2];
  std::exception_ptr failures[2];
  std::atomic<bool> failed{false};  // a side that failed leaves the other no one to wait for
  sides[0].run(statements.wait);  // side 0 holds first
  auto take_turns = [&](int me) {
    try {
      libpq_connection& mine = sides[me];
      for (int round = 0; round < rounds; ++round) {
        if (round % 2 == me) {  // holding: release once the other side waits at the server
          const std::string blocked = "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " +
                                      std::to_string(pids[1 - me]);
          while (mine.run(blocked) == "0") {
            if (failed) return;
          }
          std::this_thread::sleep_for(settle);
          release_sent_ns = steady_ns();
          mine.run(statements.release);
        } else {
          if (!statements.waiting.empty()) mine.run(statements.waiting);
          mine.run(statements.wait);
          samples[me].push_back((steady_ns() - release_sent_ns.load()) / 1000.0);
        }
      }
    } catch (...) {
      failures[me] = std::current_exception();
      failed = true;
    }
  };
  std::thread other(take_turns, 1);
  take_turns(0);
  other.join();
  for (auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  sides[rounds % 2].run(statements.release);
  samples[0].insert(samples[0].end(), samples[1].begin(), samples[1].end());
  return samples[0];
}

std::function<bool()> waiter_blocked(const std::string& url, const std::string& name) {
  const std::string blocked =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND " +
      dlock::postgres::detail::pg_locks_match(advisory_key::from_name(name));
  auto connection = std::make_shared<std::unique_ptr<libpq_connection>>();
  return [url, blocked, connection] {
    if (!*connection) *connection = std::make_unique<libpq_connection>(url);
    return (*connection)->run(blocked) != "0";
  };
}

}  // namespace dlock_bench
