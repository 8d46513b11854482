#include "board_connection.hpp"

#include <poll.h>

#include <algorithm>

#include "libpq_message.hpp"

namespace dlock::postgres::detail {

namespace {

query_result broken(std::string why) {
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  query_result r;
  r.connection_broken = true;
  r.message = std::move(why);
  return r;
}

}  // namespace

board_connection::board_connection(const options& opts, std::string endpoint,
                                   std::string first_sql)
    : parameters_(opts), endpoint_(std::move(endpoint)), first_sql_(std::move(first_sql)),
      timeout_(std::max(opts.connect_timeout, opts.release_timeout)) {}

board_connection::~board_connection() { drop(); }

void board_connection::drop() noexcept {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
}

query_result board_connection::run(const std::string& sql,
                                   const std::vector<board_parameter>& parameters) {
  std::lock_guard lock(mutex_);
  // A session the server ended while idle (idle_session_timeout, a restart) fails its next
  // statement at once: one more try on a fresh one.
  for (int attempt = 0;; ++attempt) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    const bool was_open = conn_ != nullptr;
    std::string why;
    if (!conn_ && !connect(deadline, why)) return broken(why);
    query_result r = send(sql, parameters, deadline);
    if (!r.connection_broken || !was_open || attempt > 0) return r;
  }
}

bool board_connection::connect(std::chrono::steady_clock::time_point deadline, std::string& why) {
  conn_ = PQconnectStartParams(parameters_.keywords(), parameters_.values(), 1);
  if (!conn_) {
    why = "out of memory connecting to " + endpoint_;
    return false;
  }
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED || PQstatus(conn_) == CONNECTION_BAD ||
        !wait_socket(status == PGRES_POLLING_WRITING, deadline)) {
      const bool refused = status == PGRES_POLLING_FAILED || PQstatus(conn_) == CONNECTION_BAD;
      why = refused ? libpq_message(PQerrorMessage(conn_)) : "no connection to " + endpoint_ + " in time";
      drop();
      return false;
    }
    status = PQconnectPoll(conn_);
  }
  PQsetnonblocking(conn_, 1);
  if (!first_sql_.empty()) {
    query_result r = send(first_sql_, {}, deadline);
    // 42P07/23505: another client created it at the same moment.
    if (!r.ok() && r.sqlstate != "42P07" && r.sqlstate != "23505") {
      why = "cannot create the table it needs (" + r.message + ")";
      drop();
      return false;
    }
  }
  return true;
}

bool board_connection::wait_socket(bool for_write, std::chrono::steady_clock::time_point deadline) {
  pollfd fd{PQsocket(conn_), static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

query_result board_connection::send(const std::string& sql,
                                    const std::vector<board_parameter>& parameters,
                                    std::chrono::steady_clock::time_point deadline) {
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const auto& p : parameters) {
    types.push_back(p.type);
    values.push_back(p.bytes.data());
    lengths.push_back(static_cast<int>(p.bytes.size()));
    formats.push_back(p.type == 17 ? 1 : 0);
  }
  if (!PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(parameters.size()), types.data(),
                         values.data(), lengths.data(), formats.data(), 1)) {
    query_result r = broken(libpq_message(PQerrorMessage(conn_)));
    drop();
    return r;
  }
  query_result r;
  while (true) {
    const int flushed = PQflush(conn_);
    if (flushed < 0) break;
    if (flushed == 0 && !PQisBusy(conn_)) {
      PGresult* result = PQgetResult(conn_);
      if (!result) {
        // A FATAL answer (the session was terminated) ends the session too.
        if (PQstatus(conn_) == CONNECTION_BAD) {
          r.connection_broken = true;
          drop();
        }
        return r;
      }
      const auto status = PQresultStatus(result);
      if (status == PGRES_FATAL_ERROR) {
        const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
        r.sqlstate = state && *state ? state : "XX000";
        r.message = PQresultErrorMessage(result);
      }
      r.rows.reset(result);
      continue;
    }
    if (!wait_socket(flushed > 0, deadline)) {
      drop();
      return broken("no answer from " + endpoint_ + " in time");
    }
    if (!PQconsumeInput(conn_)) break;
  }
  query_result failed = broken(libpq_message(PQerrorMessage(conn_)));
  drop();
  return failed;
}

}  // namespace dlock::postgres::detail
