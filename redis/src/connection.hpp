// Private to dlock::redis: one hiredis async connection to one server, on the backend's
// network thread (hiredis contexts are not thread-safe).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/detail/unique_function.hpp>

#include "log_in.hpp"
#include "reply.hpp"

struct redisAsyncContext;

namespace dlock::redis::detail {

/// One hiredis async connection that (re)connects on demand, logs in (AUTH, SELECT, CLIENT
/// SETNAME) before any other command is sent, and fails every command still waiting for a reply
/// once the oldest has waited longer than the command timeout.
class connection {
 public:
  /// `on_down` runs (on the network thread) each time an established connection is lost.
  connection(boost::asio::any_io_executor executor, const server_settings& settings,
             bool for_subscriptions, std::function<void()> on_down);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Sends `arguments` (connecting first if needed); `done` runs once, never inside this call.
  void command(std::vector<std::string> arguments, reply_handler done);

  /// Sends a (UN)SUBSCRIBE whose replies and messages go to `callback` with `privdata`, as
  /// hiredis routes subscription traffic (connecting first if needed). `failed` runs, maybe
  /// inside this call, if it could not be sent (no connection, refused log-in).
  void subscription_command(std::vector<std::string> arguments,
                            void (*callback)(redisAsyncContext*, void*, void*), void* privdata,
                            std::function<void(const std::string&)> failed);

  /// Drops the connection now: every command waiting for a reply fails with `why`.
  void drop(const std::string& why);

 private:
  enum class state { down, logging_in, ready };
  struct pending_command;

  void connect();
  void log_in();
  void became_ready();
  void fail_waiting(const std::string& why);
  void send(const std::vector<std::string>& arguments, void (*callback)(redisAsyncContext*, void*, void*),
            void* privdata, bool timed);
  void arm_timeout();
  std::string failure_text() const;

  static void on_connect(const redisAsyncContext* context, int status);
  static void on_disconnect(const redisAsyncContext* context, int status);
  static void on_reply(redisAsyncContext* context, void* raw_reply, void* privdata);

  boost::asio::any_io_executor executor_;
  const server_settings& settings_;
  bool for_subscriptions_;
  std::function<void()> on_down_;
  redisAsyncContext* context_ = nullptr;
  state state_ = state::down;
  std::string last_error_;
  bool closing_ = false;
  /// Sends to make once logged in; called with the failure instead if logging in fails.
  std::vector<dlock::detail::unique_function<void(const std::string* failure)>> waiting_;
  std::deque<std::chrono::steady_clock::time_point> outstanding_;
  boost::asio::steady_timer timeout_timer_;
  bool timer_armed_ = false;
};

}  // namespace dlock::redis::detail
