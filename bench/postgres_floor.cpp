#include "postgres_floor.hpp"

#include <chrono>
#include <memory>
#include <stdexcept>

#include <libpq-fe.h>

namespace bench {

namespace {

using micros = std::chrono::duration<double, std::micro>;

struct connection_deleter {
  void operator()(PGconn* connection) const { PQfinish(connection); }
};
using connection_ptr = std::unique_ptr<PGconn, connection_deleter>;

connection_ptr connect(const std::string& url) {
  connection_ptr connection(PQconnectdb(url.c_str()));
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    throw std::runtime_error(std::string("libpq: ") + PQerrorMessage(connection.get()));
  }
  return connection;
}

std::string run(PGconn* connection, const char* sql) {
  PGresult* result = PQexec(connection, sql);
  const bool ok = PQresultStatus(result) == PGRES_TUPLES_OK;
  std::string value = ok && PQntuples(result) > 0 ? PQgetvalue(result, 0, 0) : "";
  PQclear(result);
  if (!ok) throw std::runtime_error(std::string("libpq: ") + PQerrorMessage(connection));
  return value;
}

std::vector<double> timed(const std::string& url, int iterations,
                          const std::vector<const char*>& statements) {
  auto connection = connect(url);
  std::vector<double> samples;
  samples.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    for (const char* sql : statements) run(connection.get(), sql);
    samples.push_back(micros(std::chrono::steady_clock::now() - start).count());
  }
  return samples;
}

}  // namespace

std::vector<double> raw_libpq_floor(const std::string& url, int iterations) {
  return timed(url, iterations,
               {"SELECT pg_try_advisory_lock(4242424242)", "SELECT pg_advisory_unlock(4242424242)"});
}

std::vector<double> raw_libpq_round_trip(const std::string& url, int iterations) {
  return timed(url, iterations, {"SELECT 1"});
}

int server_sessions(const std::string& url, const std::string& application) {
  auto connection = connect(url);
  const std::string sql =
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + application + "'";
  return std::stoi(run(connection.get(), sql.c_str()));
}

}  // namespace bench
