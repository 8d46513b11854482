#include "pg_connection.hpp"

#include <utility>

#include <boost/asio/post.hpp>

#include "cancel_request.hpp"
#include "libpq_message.hpp"

namespace dlock::postgres::detail {

namespace {

std::string trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// libpq's text of a connection that failed or broke, each reason once (libpq_message.hpp).
std::string connection_message(PGconn* conn) { return libpq_message(PQerrorMessage(conn)); }

}  // namespace

void add_result(query_result& into, PGresult* result) {
  switch (PQresultStatus(result)) {
    case PGRES_TUPLES_OK:
      into.rows.reset(result);
      break;
    case PGRES_FATAL_ERROR:
      if (into.sqlstate.empty()) {
        const char* sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
        into.sqlstate = sqlstate && *sqlstate ? sqlstate : "XX000";
        into.message = trimmed(PQresultErrorMessage(result));
      }
      PQclear(result);
      break;
    default:
      PQclear(result);
      break;
  }
}

std::optional<std::string> query_result::value(int column) const {
  if (!rows || PQntuples(rows.get()) == 0 || PQnfields(rows.get()) <= column ||
      PQgetisnull(rows.get(), 0, column)) {
    return std::nullopt;
  }
  return std::string(PQgetvalue(rows.get(), 0, column));
}

pg_connection::pg_connection(boost::asio::any_io_executor executor, std::string endpoint)
    : executor_(std::move(executor)), endpoint_(std::move(endpoint)), connect_timer_(executor_) {}

pg_connection::~pg_connection() {
  drop_descriptor();
  if (conn_) PQfinish(conn_);
}

void pg_connection::connect(const char* const* keywords, const char* const* values,
                            std::chrono::nanoseconds timeout, std::function<void()> on_broken,
                            std::function<void(const std::string&)> on_notify) {
  on_broken_ = std::move(on_broken);
  on_notify_ = std::move(on_notify);
  state_ = state::connecting;
  conn_ = PQconnectStartParams(keywords, values, 1);
  if (!conn_) {
    fail("out of memory for a libpq connection", false);
    return;
  }
  if (PQstatus(conn_) == CONNECTION_BAD) {
    fail(connection_message(conn_), false);
    return;
  }
  // Notices (CREATE ... IF NOT EXISTS, the FATAL of a terminated session) would go to stderr;
  // what matters reaches the caller as a result or as a broken session.
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  connect_timer_.expires_after(timeout);
  connect_timer_.async_wait([weak = weak_from_this(), timeout](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ != state::connecting) return;
    self->fail("timed out after " +
                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout)
                                      .count()) +
                   " ms connecting",
               false);
  });
  poll_connect(PGRES_POLLING_WRITING);
}

void pg_connection::poll_connect(PostgresPollingStatusType status) {
  switch (status) {
    case PGRES_POLLING_OK:
      connect_timer_.cancel();
      PQsetnonblocking(conn_, 1);
      state_ = state::ready;
      backend_pid_ = PQbackendPID(conn_);
      socket_.emplace(executor_, PQsocket(conn_));
      arm_read();
      send_next();
      return;
    case PGRES_POLLING_READING:
    case PGRES_POLLING_WRITING:
      wait_socket(status == PGRES_POLLING_WRITING, [this](bool ok) {
        if (state_ != state::connecting) return;
        if (!ok) {
          fail("lost the socket while connecting", false);
          return;
        }
        poll_connect(PQconnectPoll(conn_));
      });
      return;
    default:
      fail(connection_message(conn_), false);
      return;
  }
}

// While connecting, libpq may close its socket and open another (the next host or address),
// so each wait watches the descriptor of the moment and lets go of it afterwards.
void pg_connection::wait_socket(bool for_write, std::function<void(bool ok)> then) {
  drop_descriptor();
  const int fd = PQsocket(conn_);
  if (fd < 0) {
    then(false);
    return;
  }
  socket_.emplace(executor_, fd);
  socket_->async_wait(
      for_write ? boost::asio::posix::descriptor_base::wait_write
                : boost::asio::posix::descriptor_base::wait_read,
      [weak = weak_from_this(), then = std::move(then)](boost::system::error_code ec) {
        auto self = weak.lock();
        if (!self || ec == boost::asio::error::operation_aborted) return;
        self->drop_descriptor();
        then(!ec);
      });
}

void pg_connection::execute(std::string sql, query_handler done) {
  queue_.push_back({std::move(sql), std::move(done)});
  if (broken()) {
    fail_statements("the connection is closed");
    return;
  }
  send_next();
}

void pg_connection::send_next() {
  if (state_ != state::ready || running_ || queue_.empty()) return;
  running_.emplace(std::move(queue_.front()));
  queue_.pop_front();
  if (!PQsendQuery(conn_, running_->sql.c_str())) {
    fail(connection_message(conn_), true);
    return;
  }
  flush();
}

void pg_connection::flush() {
  const int pending = PQflush(conn_);
  if (pending < 0) {
    fail(connection_message(conn_), true);
  } else if (pending > 0) {
    socket_->async_wait(boost::asio::posix::descriptor_base::wait_write,
                        [weak = weak_from_this()](boost::system::error_code ec) {
                          auto self = weak.lock();
                          if (!self || ec || self->state_ != state::ready) return;
                          self->flush();
                        });
  }
}

// One read wait is always armed while the session is up, so a session the server ends
// (restart, pg_terminate_backend) is noticed at once even when no statement runs.
void pg_connection::arm_read() {
  if (reading_ || state_ != state::ready) return;
  reading_ = true;
  socket_->async_wait(boost::asio::posix::descriptor_base::wait_read,
                      [weak = weak_from_this()](boost::system::error_code ec) {
                        auto self = weak.lock();
                        if (!self) return;
                        self->reading_ = false;
                        if (ec) return;
                        self->on_readable();
                      });
}

void pg_connection::on_readable() {
  auto keep = shared_from_this();
  if (state_ != state::ready) return;
  if (!PQconsumeInput(conn_) || PQstatus(conn_) == CONNECTION_BAD) {
    fail(connection_message(conn_), true);
    return;
  }
  if (!deliver_notifications()) return;
  collect_results();
  // libpq parses a NOTIFY that came with a result only while collecting it: deliver it now,
  // or a semaphore waiter would sleep until its next retry.
  if (!deliver_notifications()) return;
  arm_read();
}

bool pg_connection::deliver_notifications() {
  while (state_ == state::ready) {
    PGnotify* notification = PQnotifies(conn_);
    if (!notification) return true;
    std::string channel = notification->relname;
    PQfreemem(notification);
    if (on_notify_) on_notify_(channel);
  }
  return false;
}

void pg_connection::collect_results() {
  while (state_ == state::ready && running_ && !PQisBusy(conn_)) {
    PGresult* result = PQgetResult(conn_);
    if (!result) {
      statement finished = std::move(*running_);
      running_.reset();
      query_result outcome = std::move(collected_);
      collected_ = {};
      finished.done(std::move(outcome));
      send_next();
      continue;
    }
    add_result(collected_, result);
    if (PQstatus(conn_) == CONNECTION_BAD) {
      fail(connection_message(conn_), true);
      return;
    }
  }
}

bool pg_connection::cancel_running() {
  if (state_ != state::ready || !running_) return false;
  send_cancel(conn_, canceller_, backend_start_, cancelling_);
  return true;
}

void pg_connection::close() {
  if (broken()) return;
  state_ = state::closed;
  connect_timer_.cancel();
  drop_descriptor();
  if (conn_) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  fail_statements("the connection was closed");
}

void pg_connection::fail(const std::string& message, bool after_established) {
  if (broken()) return;
  auto keep = weak_from_this().lock();
  state_ = state::broken;
  connect_timer_.cancel();
  drop_descriptor();
  // Closing the socket is what makes the server end the session and free its locks, which
  // our books now say are gone; holders keep the session object until they release.
  if (conn_) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  fail_statements(message.empty() ? "the connection broke" : message);
  if (after_established && on_broken_) on_broken_();
}

void pg_connection::fail_statements(const std::string& message) {
  std::deque<statement> failed = std::move(queue_);
  queue_.clear();
  if (running_) failed.push_front(std::move(*running_));
  running_.reset();
  // Posted, so that no handler ever runs inside execute().
  for (auto& st : failed) {
    query_result result;
    result.connection_broken = true;
    result.message = message;
    boost::asio::post(executor_, [done = std::move(st.done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  }
}

void pg_connection::drop_descriptor() noexcept {
  if (!socket_) return;
  boost::system::error_code ignored;
  socket_->cancel(ignored);
  socket_->release();
  socket_.reset();
  reading_ = false;
}

}  // namespace dlock::postgres::detail
