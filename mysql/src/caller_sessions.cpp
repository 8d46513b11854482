#include "caller_sessions.hpp"

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/steady_timer.hpp>
#include <mysql.h>

#include "mariadb_exchange.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

using session_ptr = std::shared_ptr<caller_session<mariadb_caller_driver>>;

// One batch on the io thread: the exchange resumed from waits on the session's socket.
struct io_exchange {
  session_ptr session;
  mariadb_exchange exchange;
  std::string sql;
  std::function<void(query_result)> done;
  boost::asio::steady_timer timer;
};

void continue_on_io(const std::shared_ptr<io_exchange>& step, int status) {
  auto& session = *step->session;
  if (status == 0) {
    session.drop_socket();
    step->done(std::move(step->exchange.result()));
    return;
  }
  if (!session.socket) {
    session.socket.emplace(step->timer.get_executor(), mysql_get_socket(session.conn));
  }
  auto resumed = [step](int ready) { continue_on_io(step, step->exchange.resume(ready)); };
  if (status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE)) {
    const bool write = status & MYSQL_WAIT_WRITE;
    // Cancelled when the session is given up or closed: whoever did it settles the session.
    session.socket->async_wait(write ? boost::asio::posix::descriptor_base::wait_write
                                     : boost::asio::posix::descriptor_base::wait_read,
                               [resumed, write](boost::system::error_code ec) {
                                 if (!ec) resumed(write ? MYSQL_WAIT_WRITE : MYSQL_WAIT_READ);
                               });
    return;
  }
  step->timer.expires_after(
      std::chrono::milliseconds(mysql_get_timeout_value_ms(step->session->conn)));
  step->timer.async_wait([resumed](boost::system::error_code ec) {
    if (!ec) resumed(MYSQL_WAIT_TIMEOUT);
  });
}

}  // namespace

MYSQL* mariadb_caller_driver::open(std::chrono::steady_clock::time_point deadline,
                                   std::string& why) {
  MYSQL* conn = connect_blocking(settings, endpoint, deadline, why);
  if (!conn) return nullptr;
  if (why = prepare(conn, deadline); why.empty()) return conn;
  close(conn);
  return nullptr;
}

query_result mariadb_caller_driver::exchange(MYSQL* conn, std::string_view sql,
                                             std::chrono::steady_clock::time_point deadline) const {
  return exchange_blocking(conn, endpoint, sql, deadline);
}

void mariadb_caller_driver::exchange_on_io(const session_ptr& session, std::string sql,
                                           std::function<void(query_result)> done) const {
  auto step = std::make_shared<io_exchange>(io_exchange{
      session, mariadb_exchange(session->conn), std::move(sql), std::move(done),
      boost::asio::steady_timer(executor)});
  continue_on_io(step, step->exchange.start(step->sql));
}

std::string mariadb_caller_driver::probe_sql(const std::vector<const mysql_grant*>& grants) const {
  std::vector<std::string> names;
  names.reserve(grants.size());
  for (const auto* grant : grants) names.push_back(grant->server_name);
  return detail::probe_sql(names);
}

int mariadb_caller_driver::socket(MYSQL* conn) { return mysql_get_socket(conn); }

// Connector/C has read its answers whole, so anything on an idle connection's socket is the
// server's: an end of file, or the error it sends before it closes (a KILL, wait_timeout).
bool mariadb_caller_driver::still_open(MYSQL* conn) {
  char byte;
  return ::recv(mysql_get_socket(conn), &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
         (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

// Shut first: closing then sends nothing that could block, and the server sees the connection
// end (and frees its locks) at once.
void mariadb_caller_driver::close(MYSQL* conn) noexcept {
  ::shutdown(mysql_get_socket(conn), SHUT_RDWR);
  mysql_close(conn);
}

}  // namespace dlock::mysql::detail
