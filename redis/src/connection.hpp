// Private to dlock::redis: one connection to one server over a transport (TCP, TLS, a Unix
// socket), speaking RESP: commands formatted by hiredis, replies parsed by hiredis's reader.
// Not thread-safe: every call and every handler is on the executor it was made with.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/detail/unique_function.hpp>

#include "log_in.hpp"
#include "reply.hpp"

struct redisReader;

namespace dlock::redis::detail {

class transport;

/// A connection that (re)connects on demand, logs in (AUTH, SELECT, CLIENT SETNAME) before any
/// other command is sent, pipelines what is sent while a write is under way, and fails every
/// command still waiting for a reply once the oldest has waited longer than the command
/// timeout (which also bounds connecting, the TLS handshake and logging in).
///
/// Replies are matched to commands in order. A subscriber connection (one made with
/// `on_message`) hands every reply that no command waits for, the (un)subscription
/// confirmations and the messages, to `on_message`.
class connection {
 public:
  /// `on_down` runs (on the executor) each time an established connection is lost.
  connection(boost::asio::any_io_executor executor, const server_settings& settings,
             std::function<void()> on_down = {},
             std::function<void(const reply&)> on_message = {});
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Sends `arguments` (connecting first if needed); `done` runs once, never inside this call.
  void command(std::vector<std::string> arguments, reply_handler done);

  /// Sends a (UN)SUBSCRIBE on a subscriber connection (connecting first if needed); what the
  /// server answers goes to `on_message`. `failed` runs, maybe inside this call, if it could
  /// not be sent (no connection, refused log-in).
  void subscription_command(std::vector<std::string> arguments,
                            std::function<void(const std::string&)> failed);

  /// Sends `arguments` and reads the reply on the calling thread, straight on the socket (no
  /// reactor, no timer: a send, a poll and a read), waiting at most the command timeout; a
  /// failure drops the connection. Nothing (std::nullopt) when that cannot be done now: not
  /// logged in yet, other commands under way, or a transport with no descriptor of its own
  /// (TLS); then command() is the way. Only while no one runs the executor.
  std::optional<command_result> command_now(const std::vector<std::string>& arguments);

  /// Connects (and logs in) now if it is down, so that the first command finds it ready.
  void open();

  /// Drops the connection now: every command waiting for a reply fails with `why`.
  void drop(const std::string& why);

  /// `observer` hears (on the executor) each time the connection is ready, with nullptr, and
  /// each time it is lost or cannot be made, with why; never for its own destruction.
  void watch_link(std::function<void(const std::string* failure)> observer) {
    link_observer_ = std::move(observer);
  }

  /// Whether the last loss was a reply (or connection) not coming in time, rather than a
  /// refusal or a closed connection.
  bool timed_out() const noexcept { return timed_out_; }

 private:
  enum class state { down, connecting, logging_in, ready };
  struct awaited_reply {
    std::chrono::steady_clock::time_point sent;
    reply_handler done;
  };
  struct buffers;
  struct reader_deleter {
    void operator()(redisReader* reader) const noexcept;
  };

  void connect();
  void opened(std::string failure);
  void log_in();
  void send_late_log_in_steps();
  void became_ready();
  void fail_waiting(const std::string& why);
  void send(const std::vector<std::string>& arguments, reply_handler done);
  void flush();
  void read();
  /// Returns false when a handler destroyed the connection.
  bool received(std::size_t bytes);
  void arm_timeout();

  boost::asio::any_io_executor executor_;
  const server_settings& settings_;
  std::function<void()> on_down_;
  std::function<void(const std::string*)> link_observer_;
  std::function<void(const reply&)> on_message_;
  /// Null while down. Pending operations hold it too, and tell a stale completion (of a
  /// transport dropped since) by comparing.
  std::shared_ptr<transport> transport_;
  std::shared_ptr<buffers> buffers_;
  std::unique_ptr<redisReader, reader_deleter> reader_;
  state state_ = state::down;
  std::string last_error_;
  bool closing_ = false;
  bool timed_out_ = false;
  bool write_in_flight_ = false;
  /// Commands formatted but not yet written (they go in one write once the current one ends).
  std::string output_;
  /// Sends to make once logged in; called with the failure instead if logging in fails.
  std::vector<dlock::detail::unique_function<void(const std::string* failure)>> waiting_;
  std::deque<awaited_reply> awaited_;
  /// Log-in steps made once the transport is open (log_in_step::late_command).
  std::vector<std::pair<std::function<std::vector<std::string>()>, reply_handler>> late_steps_;
  boost::asio::steady_timer timeout_timer_;
  bool timer_armed_ = false;
  /// Expires with the connection, so that a completion queued before never touches it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlock::redis::detail
