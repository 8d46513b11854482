// Private to dlock::postgres: one libpq connection driven asynchronously on an Asio executor.
//
// libpqxx 6.4 has no non-blocking API (its pipeline still blocks to retrieve), and a waiting
// acquire must hold no thread, so the backend's own sessions use libpq's asynchronous calls
// (PQconnectStart/PQconnectPoll, PQsendQuery, PQconsumeInput) with a wait on the socket.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <libpq-fe.h>

#include <dlock/core/detail/unique_function.hpp>

#include "cancel_request.hpp"

namespace dlock::postgres::detail {

struct result_deleter {
  void operator()(PGresult* result) const noexcept { PQclear(result); }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

/// What a query gave: the last result with rows, or the failure.
struct query_result {
  result_ptr rows;
  std::string sqlstate;             ///< of a failed statement; empty on success
  std::string message;              ///< the server's or libpq's message on failure
  bool connection_broken = false;   ///< the session is gone: every lock it held is free
  bool ok() const noexcept { return sqlstate.empty() && !connection_broken; }
  /// Column `column` of the first row, or nullopt when there is none or it is NULL.
  std::optional<std::string> value(int column = 0) const;
};

/// Adds one of a query's results to `into` (taking it): the rows of the last that has rows,
/// the first failure's SQLSTATE and message.
void add_result(query_result& into, PGresult* result);

/// One session. All members run on the executor's thread (a single-threaded io_context).
/// Statements queue and run one at a time; the text is sent as a simple query, so it may
/// hold several statements (all the backend's values are integers or checked identifiers).
class pg_connection : public std::enable_shared_from_this<pg_connection> {
 public:
  using query_handler = dlock::detail::unique_function<void(query_result)>;

  /// `keywords`/`values`: NULL-terminated libpq connection parameters (expand_dbname on).
  pg_connection(boost::asio::any_io_executor executor, std::string endpoint);
  ~pg_connection();
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;

  /// Starts connecting; statements executed meanwhile wait for it. `on_broken` runs once
  /// when the session is lost after it was established.
  void connect(const char* const* keywords, const char* const* values,
               std::chrono::nanoseconds timeout, std::function<void()> on_broken,
               std::function<void(const std::string& channel)> on_notify);

  /// Queues `sql`; `done` runs on the executor with its result, exactly once, never inside
  /// this call.
  void execute(std::string sql, query_handler done);

  /// Cancels through `by` (cancel_request.hpp; set before connect()) once the session's
  /// backend_start is known.
  void set_canceller(canceller by) { canceller_ = std::move(by); }
  /// pg_stat_activity.backend_start of this session, as text (set_canceller's guard against
  /// a pid the server gave to another session since). Executor's thread.
  void set_backend_start(std::string started) { backend_start_ = std::move(started); }

  /// Asks the server to cancel the statement running now (through the canceller, else
  /// PQcancel, on a short-lived thread of its own). The statement then fails with 57014
  /// unless it finished first.
  /// Returns false when no statement is running (it may still be queued).
  /// The server drops a cancel that arrives before it has read the statement, so a caller
  /// that still waits should call again; while an earlier request is on its way (a silent
  /// server never answers it), a call sends nothing more.
  bool cancel_running();

  /// Ends the session as broken (on_broken runs) and closes the connection, so the server
  /// frees what it held: for a keepalive that got no answer.
  void abandon(const std::string& why) { fail(why, true); }

  /// Ends the session now: queued statements fail as broken; on_broken does not run.
  void close();

  bool broken() const noexcept { return state_ == state::broken || state_ == state::closed; }
  bool busy() const noexcept { return running_.has_value() || !queue_.empty(); }
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// The server process of this session (pg_locks.pid), 0 until connected. Any thread.
  int backend_pid() const noexcept { return backend_pid_.load(); }

 private:
  enum class state { idle, connecting, ready, broken, closed };
  struct statement {
    std::string sql;
    query_handler done;
  };

  void poll_connect(PostgresPollingStatusType status);
  void wait_socket(bool for_write, std::function<void(bool ok)> then);
  void send_next();
  void flush();
  void arm_read();
  void on_readable();
  void collect_results();
  /// Hands parsed NOTIFYs to on_notify; false when the session ended meanwhile.
  bool deliver_notifications();
  void fail(const std::string& message, bool after_established);
  void fail_statements(const std::string& message);
  void drop_descriptor() noexcept;

  boost::asio::any_io_executor executor_;
  std::string endpoint_;
  PGconn* conn_ = nullptr;
  state state_ = state::idle;
  std::optional<boost::asio::posix::stream_descriptor> socket_;
  bool reading_ = false;
  boost::asio::steady_timer connect_timer_;
  std::function<void()> on_broken_;
  std::function<void(const std::string&)> on_notify_;
  std::deque<statement> queue_;
  std::optional<statement> running_;
  query_result collected_;
  std::atomic<int> backend_pid_{0};
  canceller canceller_;
  std::string backend_start_;
  // Set while a PQcancel thread runs; shared with it, since it may outlive the connection.
  std::shared_ptr<std::atomic<bool>> cancelling_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace dlock::postgres::detail
