#include "connection.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <mutex>

#include <boost/asio/post.hpp>
#include <mysql.h>
#include <errmsg.h>

#include "mariadb_exchange.hpp"

namespace dlock::mysql::detail {

namespace {

query_result broken_answer(const std::string& message) {
  query_result r;
  r.connection_broken = true;
  r.error = CR_SERVER_LOST;
  r.message = message;
  return r;
}

}  // namespace

void initialize_client_library() {
  static std::once_flag initialized;
  std::call_once(initialized, [] { mysql_library_init(0, nullptr, nullptr); });
}

std::optional<std::string> query_result::value(std::size_t column) const {
  if (rows.empty() || rows.front().size() <= column) return std::nullopt;
  return rows.front()[column];
}

mariadb_connection::mariadb_connection(boost::asio::any_io_executor executor, std::string endpoint)
    : executor_(std::move(executor)), endpoint_(std::move(endpoint)), wait_timer_(executor_),
      connect_timer_(executor_) {}

mariadb_connection::~mariadb_connection() {
  drop_descriptor();
  if (mysql_) mysql_close(mysql_);
}

void mariadb_connection::connect(const options& opts, std::function<void()> on_broken) {
  initialize_client_library();
  on_broken_ = std::move(on_broken);
  state_ = state::connecting;
  mysql_ = mysql_init(nullptr);
  if (!mysql_) {
    fail("out of memory for a connection", false);
    return;
  }
  tls_required_ = opts.tls.enabled;
  // Our own limit too: the library's counts only the TCP connect, not the handshake.
  connect_timer_.expires_after(opts.connect_timeout);
  connect_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && self->state_ == state::connecting) {
      self->fail("no connection within connect_timeout", false);
    }
  });
  const int status = start_connecting(&connect_return_, mysql_, opts);
  drive(status,
        [this](int ready) { return mysql_real_connect_cont(&connect_return_, mysql_, ready); },
        [this] { connected(connect_return_ != nullptr); });
}

// Waits for what the suspended call asked (its socket readable or writable, or its timeout),
// resumes it, and repeats until it finishes. Each wait belongs to one generation, so that a
// wake-up for an older wait (the timer racing the socket) is ignored.
void mariadb_connection::drive(int status, resume next, std::function<void()> finished) {
  if (broken()) return;
  if (status == 0) {
    finished();
    return;
  }
  const int fd = mysql_get_socket(mysql_);
  if (fd >= 0 && (!socket_ || socket_->native_handle() != fd)) {
    drop_descriptor();
    socket_.emplace(executor_, fd);
  }
  const std::uint64_t generation = ++wait_generation_;
  auto step = std::make_shared<std::pair<resume, std::function<void()>>>(std::move(next),
                                                                         std::move(finished));
  auto woken = [weak = weak_from_this(), generation, step](int ready) {
    auto self = weak.lock();
    if (!self || self->broken() || generation != self->wait_generation_) return;
    ++self->wait_generation_;
    self->wait_timer_.cancel();
    if (self->socket_) self->socket_->cancel();
    const int again = step->first(ready);
    self->drive(again, std::move(step->first), std::move(step->second));
  };
  if (status & MYSQL_WAIT_TIMEOUT) {
    wait_timer_.expires_after(std::chrono::milliseconds(mysql_get_timeout_value_ms(mysql_)));
    wait_timer_.async_wait([woken](boost::system::error_code ec) {
      if (!ec) woken(MYSQL_WAIT_TIMEOUT);
    });
  }
  if (socket_ && (status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE))) {
    const bool write = status & MYSQL_WAIT_WRITE;
    socket_->async_wait(
        write ? boost::asio::posix::stream_descriptor::wait_write
              : boost::asio::posix::stream_descriptor::wait_read,
        [woken, write](boost::system::error_code ec) {
          if (!ec) woken(write ? MYSQL_WAIT_WRITE : MYSQL_WAIT_READ);
        });
  }
}

void mariadb_connection::connected(bool ok) {
  connect_timer_.cancel();
  if (!ok) {
    fail(mysql_error(mysql_), false);
    return;
  }
  if (const std::string refusal = refusal_after_connect(mysql_, tls_required_); !refusal.empty()) {
    fail(refusal, false);
    return;
  }
  thread_id_ = mysql_thread_id(mysql_);
  state_ = state::ready;
  send_next();
}

void mariadb_connection::execute(std::string sql, query_handler done) {
  if (broken()) {
    fail_later(std::move(done), "the connection is closed");
    return;
  }
  queue_.push_back({std::move(sql), std::move(done)});
  if (state_ == state::ready && !running_) send_next();
}

void mariadb_connection::send_next() {
  if (running_ || state_ != state::ready) return;
  if (queue_.empty()) {
    watch_idle();
    return;
  }
  ++wait_generation_;  // ends the idle watch
  running_ = std::move(queue_.front());
  queue_.pop_front();
  collected_ = {};
  const int status = mysql_real_query_start(&int_return_, mysql_, running_->sql.data(),
                                            running_->sql.size());
  drive(status, [this](int ready) { return mysql_real_query_cont(&int_return_, mysql_, ready); },
        [this] { query_sent(int_return_); });
}

// An idle connection expects nothing from the server: a readable socket means it closed the
// connection (KILL, wait_timeout, shutdown), which the holders must hear now, not at the next
// keepalive.
void mariadb_connection::watch_idle() {
  const int fd = mysql_get_socket(mysql_);
  if (fd < 0) return;
  if (!socket_ || socket_->native_handle() != fd) {
    drop_descriptor();
    socket_.emplace(executor_, fd);
  }
  const std::uint64_t generation = ++wait_generation_;
  socket_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [weak = weak_from_this(), generation](boost::system::error_code ec) {
                        auto self = weak.lock();
                        if (ec || !self || self->broken() || self->running_ ||
                            generation != self->wait_generation_) {
                          return;
                        }
                        // Connector/C may have read what woke us already: only an end of
                        // file or unasked-for bytes mean the server spoke.
                        char byte;
                        if (::recv(self->socket_->native_handle(), &byte, 1,
                                   MSG_PEEK | MSG_DONTWAIT) < 0 &&
                            (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
                          self->watch_idle();
                          return;
                        }
                        self->fail("the server closed the connection", true);
                      });
}

bool mariadb_connection::failed_from_client() const {
  const unsigned error = mysql_errno(mysql_);
  return error >= CR_MIN_ERROR && error <= CR_MAX_ERROR;
}

void mariadb_connection::query_sent(int error) {
  if (error != 0) {
    statement_failed();
    return;
  }
  store_next();
}

// A client error (2000-2999) means the connection is gone; a server error ends the batch.
void mariadb_connection::statement_failed() {
  if (failed_from_client()) {
    fail(mysql_error(mysql_), true);
    return;
  }
  collected_.error = mysql_errno(mysql_);
  collected_.message = mysql_error(mysql_);
  statement_done();
}

void mariadb_connection::store_next() {
  const int status = mysql_store_result_start(&result_return_, mysql_);
  drive(status,
        [this](int ready) { return mysql_store_result_cont(&result_return_, mysql_, ready); },
        [this] { stored(result_return_); });
}

// One result of a batch: rows kept when it has columns; then the next result, if any.
void mariadb_connection::stored(MYSQL_RES* result) {
  if (result) {
    keep_rows(collected_, result);
    mysql_free_result(result);
  } else if (mysql_errno(mysql_) != 0) {
    statement_failed();
    return;
  }
  if (!mysql_more_results(mysql_)) {
    statement_done();
    return;
  }
  const int status = mysql_next_result_start(&int_return_, mysql_);
  drive(status, [this](int ready) { return mysql_next_result_cont(&int_return_, mysql_, ready); },
        [this] {
          if (int_return_ > 0) {
            query_sent(1);  // a later statement of the batch failed
          } else {
            store_next();
          }
        });
}

void mariadb_connection::statement_done() {
  auto finished = std::move(*running_);
  running_.reset();
  auto result = std::move(collected_);
  collected_ = {};
  ++undelivered_answers_;
  boost::asio::post(executor_, [self = shared_from_this(), done = std::move(finished.done),
                                result = std::move(result)]() mutable {
    --self->undelivered_answers_;
    // The connection broke after the server answered: what the answer granted ended with it,
    // so it must not reach its handler as a grant still held (nobody would tell it lost).
    if (self->broken()) {
      result = broken_answer("the connection ended after the server answered (" +
                             self->broken_because_ + ")");
    }
    done(std::move(result));
  });
  send_next();
}

void mariadb_connection::fail_statements(const std::string& message) {
  std::deque<statement> failed;
  if (running_) failed.push_back(std::move(*running_));
  running_.reset();
  for (auto& s : queue_) failed.push_back(std::move(s));
  queue_.clear();
  for (auto& s : failed) fail_later(std::move(s.done), message);
}

void mariadb_connection::fail_later(query_handler done, const std::string& message) {
  boost::asio::post(executor_, [done = std::move(done), message]() mutable {
    done(broken_answer(message));
  });
}

void mariadb_connection::fail(const std::string& message, bool after_established) {
  if (broken()) return;
  const bool was_ready = state_ == state::ready;
  state_ = state::broken;
  broken_because_ = message;
  ++wait_generation_;
  connect_timer_.cancel();
  wait_timer_.cancel();
  // Shut the socket first: closing then sends nothing that could block, and the server sees
  // the connection end (and frees its locks) at once.
  if (socket_) ::shutdown(socket_->native_handle(), SHUT_RDWR);
  drop_descriptor();
  if (mysql_) {
    mysql_close(mysql_);
    mysql_ = nullptr;
  }
  fail_statements(message);
  if ((after_established || was_ready) && on_broken_) {
    auto on_broken = std::move(on_broken_);
    on_broken_ = nullptr;
    on_broken();
  }
}

void mariadb_connection::close() {
  if (broken()) return;
  on_broken_ = nullptr;
  fail("the connection was closed", false);
  state_ = state::closed;
}

// Connector/C owns the socket: the descriptor object only waits on it.
void mariadb_connection::drop_descriptor() noexcept {
  if (!socket_) return;
  boost::system::error_code ignored;
  socket_->cancel(ignored);
  socket_->release();
  socket_.reset();
}

}  // namespace dlock::mysql::detail
