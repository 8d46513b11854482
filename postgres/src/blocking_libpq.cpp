#include "blocking_libpq.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>

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

enum class waited { ready, failed, woken };

waited wait_socket(PGconn* conn, bool for_write, std::chrono::steady_clock::time_point deadline,
                   int wakeup = -1) {
  pollfd fds[2] = {{PQsocket(conn), static_cast<short>(for_write ? POLLOUT : POLLIN), 0},
                   {wakeup, POLLIN, 0}};
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return waited::failed;
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready > 0) return fds[1].revents != 0 ? waited::woken : waited::ready;
    if (ready < 0 && errno != EINTR) return waited::failed;
  }
}

}  // namespace

PGconn* connect_blocking(const connection_parameters& parameters, const std::string& endpoint,
                         std::chrono::steady_clock::time_point deadline, std::string& why,
                         int wakeup) {
  PGconn* conn = PQconnectStartParams(parameters.keywords(), parameters.values(), 1);
  if (!conn) {
    why = "out of memory connecting to " + endpoint;
    return nullptr;
  }
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    const bool refused = status == PGRES_POLLING_FAILED || PQstatus(conn) == CONNECTION_BAD;
    const waited ready =
        refused ? waited::failed
                : wait_socket(conn, status == PGRES_POLLING_WRITING, deadline, wakeup);
    if (ready != waited::ready) {
      why = refused                  ? libpq_message(PQerrorMessage(conn))
            : ready == waited::woken ? std::string()
                                     : "no connection to " + endpoint + " in time";
      PQfinish(conn);
      return nullptr;
    }
    status = PQconnectPoll(conn);
  }
  // Notices (CREATE ... IF NOT EXISTS, the FATAL of a terminated session) would go to stderr.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  PQsetnonblocking(conn, 1);
  return conn;
}

query_result send_blocking(PGconn* conn, const std::string& endpoint, const std::string& sql,
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
  const int sent =
      parameters.empty()
          ? PQsendQuery(conn, sql.c_str())
          : PQsendQueryParams(conn, sql.c_str(), static_cast<int>(parameters.size()),
                              types.data(), values.data(), lengths.data(), formats.data(), 1);
  if (!sent) return broken(libpq_message(PQerrorMessage(conn)));
  query_result r;
  while (true) {
    const int flushed = PQflush(conn);
    if (flushed < 0) break;
    if (flushed == 0 && !PQisBusy(conn)) {
      PGresult* result = PQgetResult(conn);
      if (!result) {
        // A FATAL answer (the session was terminated) ends the session too.
        if (PQstatus(conn) == CONNECTION_BAD) r.connection_broken = true;
        return r;
      }
      add_result(r, result);
      continue;
    }
    if (wait_socket(conn, flushed > 0, deadline) != waited::ready) {
      return broken("no answer from " + endpoint + " in time");
    }
    if (!PQconsumeInput(conn)) break;
  }
  return broken(libpq_message(PQerrorMessage(conn)));
}

}  // namespace dlock::postgres::detail
