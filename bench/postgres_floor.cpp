#include "postgres_floor.hpp"

#include <chrono>
#include <stdexcept>

#include <libpq-fe.h>

namespace dlock_bench {

namespace {

using micros = std::chrono::duration<double, std::micro>;

}  // namespace

struct raw_libpq::connection {
  PGconn* handle = nullptr;
  ~connection() { PQfinish(handle); }

  std::string run(const std::string& sql) {
    PGresult* result = PQexec(handle, sql.c_str());
    const bool ok = PQresultStatus(result) == PGRES_TUPLES_OK;
    std::string value = ok && PQntuples(result) > 0 ? PQgetvalue(result, 0, 0) : "";
    PQclear(result);
    if (!ok) throw std::runtime_error(std::string("libpq: ") + PQerrorMessage(handle));
    return value;
  }

  double timed(std::initializer_list<const char*> statements) {
    const auto start = std::chrono::steady_clock::now();
    for (const char* sql : statements) run(sql);
    return micros(std::chrono::steady_clock::now() - start).count();
  }
};

raw_libpq::raw_libpq(const std::string& url) : connection_(std::make_unique<connection>()) {
  connection_->handle = PQconnectdb(url.c_str());
  if (PQstatus(connection_->handle) != CONNECTION_OK) {
    throw std::runtime_error(std::string("libpq: ") + PQerrorMessage(connection_->handle));
  }
}

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

double raw_libpq::round_trip_us() { return connection_->timed({"SELECT 1"}); }

int raw_libpq::server_sessions(const std::string& application) {
  return std::stoi(connection_->run(
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + application + "'"));
}

}  // namespace dlock_bench
