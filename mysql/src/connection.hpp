// Private to dlock::mysql: one MariaDB Connector/C connection driven on an Asio executor.
//
// A waiting acquire must hold no thread, so every connection uses Connector/C's non-blocking
// API (MYSQL_OPT_NONBLOCK: mysql_real_connect_start/_cont, mysql_real_query_start/_cont, ...)
// with waits on its socket, and statements run one at a time from a queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/detail/unique_function.hpp>
#include <dlock/mysql/options.hpp>

struct st_mysql;
struct st_mysql_res;

namespace dlock::mysql::detail {

/// Initializes Connector/C (and the OpenSSL it brings up) once per process. mysql_init() would
/// do it on first use, which is not thread-safe; and the thread that does it keeps OpenSSL's
/// per-thread state, so the backend calls this on the thread that makes the provider (the
/// application's), not on its own io thread, which ends with the provider.
void initialize_client_library();

/// What a statement (or a batch of them) gave: the rows of its last result set, or the
/// failure.
struct query_result {
  std::vector<std::vector<std::optional<std::string>>> rows;
  unsigned error = 0;               ///< the server's or client's error number; 0 on success
  std::string message;              ///< its message
  bool connection_broken = false;   ///< the connection is gone: every lock it held is free
  bool ok() const noexcept { return error == 0 && !connection_broken; }
  /// Column `column` of the first row, or nullopt when there is none or it is NULL.
  std::optional<std::string> value(std::size_t column = 0) const;
};

/// One connection. All members run on the executor's thread (a single-threaded io_context).
class mariadb_connection : public std::enable_shared_from_this<mariadb_connection> {
 public:
  using query_handler = dlock::detail::unique_function<void(query_result)>;

  mariadb_connection(boost::asio::any_io_executor executor, std::string endpoint);
  ~mariadb_connection();
  mariadb_connection(const mariadb_connection&) = delete;
  mariadb_connection& operator=(const mariadb_connection&) = delete;

  /// Starts connecting with `opts`; statements executed meanwhile wait for it. `on_broken`
  /// runs once when the connection is lost after it was established.
  void connect(const options& opts, std::function<void()> on_broken);

  /// Queues `sql` (several statements separated by ';' allowed); `done` runs on the executor
  /// with its result, exactly once, never inside this call.
  void execute(std::string sql, query_handler done);

  /// Ends the connection as broken (on_broken runs) and closes it, so the server frees what
  /// it held: for a keepalive that got no answer.
  void abandon(const std::string& why) { fail(why, true); }

  /// Ends the connection now: queued statements fail as broken; on_broken does not run.
  void close();

  bool broken() const noexcept { return state_ == state::broken || state_ == state::closed; }
  /// Runs a statement, has one queued, or has an answer on its way to its handler: a pool
  /// that took an idle connection for one that holds nothing would close it under a grant
  /// that answer brings.
  bool busy() const noexcept {
    return running_.has_value() || !queue_.empty() || undelivered_answers_ != 0;
  }
  /// The server's id of this connection (for KILL QUERY), 0 until connected.
  std::uint64_t thread_id() const noexcept { return thread_id_; }
  const std::string& endpoint() const noexcept { return endpoint_; }

 private:
  enum class state { idle, connecting, ready, broken, closed };
  struct statement {
    std::string sql;
    query_handler done;
  };
  /// Resumes a suspended call with the events that happened; returns its new wait status.
  using resume = std::function<int(int ready)>;

  void drive(int status, resume next, std::function<void()> finished);
  void connected(bool ok);
  void send_next();
  void watch_idle();
  void fail_later(query_handler done, const std::string& message);
  void query_sent(int error);
  void store_next();
  void stored(::st_mysql_res* result);
  void statement_done();
  void statement_failed();
  void fail(const std::string& message, bool after_established);
  void fail_statements(const std::string& message);
  void drop_descriptor() noexcept;
  bool failed_from_client() const;

  boost::asio::any_io_executor executor_;
  std::string endpoint_;
  st_mysql* mysql_ = nullptr;
  state state_ = state::idle;
  std::optional<boost::asio::posix::stream_descriptor> socket_;
  boost::asio::steady_timer wait_timer_;
  boost::asio::steady_timer connect_timer_;
  std::uint64_t wait_generation_ = 0;
  std::uint64_t thread_id_ = 0;
  bool tls_required_ = false;
  std::function<void()> on_broken_;
  std::deque<statement> queue_;
  std::optional<statement> running_;
  query_result collected_;
  std::size_t undelivered_answers_ = 0;  // posted to their handlers, not yet run
  std::string broken_because_;           // fail()'s message
  // Out-parameters of the suspended call, which writes them when it finishes.
  st_mysql* connect_return_ = nullptr;
  int int_return_ = 0;
  ::st_mysql_res* result_return_ = nullptr;
};

}  // namespace dlock::mysql::detail
