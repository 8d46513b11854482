#include "caller_sessions.hpp"

#include <utility>

#include "blocking_libpq.hpp"
#include "libpq_message.hpp"

namespace dlock::postgres::detail {

namespace {

using session_ptr = std::shared_ptr<caller_session>;

query_result broken_result(std::string message) {
  query_result r;
  r.connection_broken = true;
  r.message = std::move(message);
  return r;
}

// Reads the answer to a statement sent on the io thread, from waits on the session's socket.
void read_on_io(const session_ptr& session, std::shared_ptr<query_result> collected,
                std::function<void(query_result)> done) {
  // A statement the send buffer could not take at once is flushed as the socket drains.
  const bool writing = PQflush(session->conn) > 0;
  session->socket->async_wait(
      writing ? boost::asio::posix::descriptor_base::wait_write
              : boost::asio::posix::descriptor_base::wait_read,
      [session, collected, done = std::move(done), writing](boost::system::error_code ec) mutable {
        if (ec) return;  // closed: whoever closed it has given the session up
        PGconn* conn = session->conn;
        auto finish = [&](query_result r) {
          session->drop_socket();
          done(std::move(r));
        };
        if (!writing && !PQconsumeInput(conn)) {
          finish(broken_result(libpq_message(PQerrorMessage(conn))));
          return;
        }
        while (!writing && !PQisBusy(conn)) {
          PGresult* result = PQgetResult(conn);
          if (!result) {
            if (PQstatus(conn) == CONNECTION_BAD) collected->connection_broken = true;
            finish(std::move(*collected));
            return;
          }
          add_result(*collected, result);
        }
        if (PQstatus(conn) == CONNECTION_BAD) {
          finish(broken_result(libpq_message(PQerrorMessage(conn))));
          return;
        }
        read_on_io(session, std::move(collected), std::move(done));
      });
}

}  // namespace

PGconn* pg_caller_driver::open(std::chrono::steady_clock::time_point deadline, std::string& why,
                               int wakeup, session_extras& extras) {
  PGconn* conn = connect_blocking(*parameters, endpoint, deadline, why, wakeup);
  if (!conn) return nullptr;
  if (why = prepare(conn, deadline, extras.backend_start); !why.empty()) {
    PQfinish(conn);
    return nullptr;
  }
  extras.pid = PQbackendPID(conn);
  return conn;
}

query_result pg_caller_driver::exchange(PGconn* conn, const std::string& sql,
                                        std::chrono::steady_clock::time_point deadline) const {
  return send_blocking(conn, endpoint, sql, {}, deadline);
}

void pg_caller_driver::exchange_on_io(const session_ptr& session, std::string sql,
                                      std::function<void(query_result)> done) const {
  if (!PQsendQuery(session->conn, sql.c_str()) || PQflush(session->conn) < 0) {
    done(broken_result(libpq_message(PQerrorMessage(session->conn))));
    return;
  }
  session->socket.emplace(executor, PQsocket(session->conn));
  read_on_io(session, std::make_shared<query_result>(), std::move(done));
}

}  // namespace dlock::postgres::detail
