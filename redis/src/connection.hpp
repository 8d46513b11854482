// Private to dlock::redis: one server's connections (commands and subscriptions) over hiredis.
//
// Everything here runs on the backend's network thread (hiredis contexts are not thread-safe),
// except sync_connections, which any thread may use.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/detail/unique_function.hpp>

struct redisAsyncContext;
struct redisContext;
struct redisReply;

namespace dlock::redis::detail {

/// A reply copied out of hiredis (which frees its own after the callback).
struct reply {
  enum class kind { string, array, integer, nil, status, error };
  kind type = kind::nil;
  long long integer = 0;
  std::string text;             ///< string, status and error replies
  std::vector<reply> elements;  ///< arrays
  bool is_error() const noexcept { return type == kind::error; }
};

/// A command's outcome: `failure` says why no reply came (connection refused or lost, no reply
/// in time, handshake refused); otherwise `value` is the server's reply, which may be an error.
struct command_result {
  std::optional<std::string> failure;
  reply value;
};

using reply_handler = dlock::detail::unique_function<void(command_result)>;

/// Copies a hiredis reply.
reply copy_reply(const redisReply& from);

/// How to reach and log in to one server.
struct server_settings {
  std::string host;
  std::uint16_t port = 6379;
  std::string user;                     ///< ACL user; empty: the default user
  std::optional<std::string> password;  ///< never shown in any message
  int database = 0;
  std::chrono::nanoseconds command_timeout = std::chrono::seconds(5);
  std::string client_name = "dlock";
};

/// One step of logging in: the command and what its error reply means.
struct log_in_step {
  std::vector<std::string> command;
  std::string failure;  ///< e.g. "authentication failed", followed by the server's words
};

/// AUTH (when there is a password), SELECT (a database other than 0, not for subscriptions)
/// and CLIENT SETNAME, in that order.
std::vector<log_in_step> log_in_steps(const server_settings& settings, bool for_subscriptions);

/// Blocking connections for the caller's thread, kept in a pool: a blocking acquire's first
/// attempt and a release on one server go there directly instead of through the network
/// thread, which saves two thread hops on the uncontended path.
class sync_connections {
 public:
  explicit sync_connections(const server_settings& settings) : settings_(settings) {}
  ~sync_connections();
  sync_connections(const sync_connections&) = delete;
  sync_connections& operator=(const sync_connections&) = delete;

  /// Sends `arguments` on an idle connection (a new one, logged in, when none is idle) and
  /// waits at most the command timeout for the reply.
  command_result command(const std::vector<std::string>& arguments);

 private:
  redisContext* connect(std::string& failure);

  const server_settings& settings_;
  std::mutex mutex_;
  std::vector<redisContext*> idle_;
};

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

/// What a waiter hears on its name's release channel.
enum class channel_event { subscribed, released, lost };

class channel_listener {
 public:
  virtual ~channel_listener() = default;
  /// Runs on the network thread, never inside node::listen or node::unlisten.
  virtual void on_channel_event(channel_event event) = 0;
};

/// One server: a command connection and one subscriber connection shared by every waiter of
/// the provider, with one SUBSCRIBE per channel however many wait on it.
class node {
 public:
  node(boost::asio::any_io_executor executor, server_settings settings);
  ~node();

  /// "host:port", for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }
  const server_settings& settings() const noexcept { return settings_; }

  void command(std::vector<std::string> arguments, reply_handler done) {
    commands_.command(std::move(arguments), std::move(done));
  }
  /// Sends `arguments` on a blocking connection from the calling thread (any thread).
  command_result command_here(const std::vector<std::string>& arguments) {
    return blocking_.command(arguments);
  }

  /// Adds `listener` to `channel`, subscribing if it is the first; it hears `subscribed` once
  /// the server confirmed the subscription, then `released` per message, or `lost` when the
  /// subscriber connection dropped (the listener is removed then). No-op when already listening.
  void listen(const std::string& channel, const std::shared_ptr<channel_listener>& listener);
  /// Removes `listener`; unsubscribes when it was the last. No-op when not listening.
  void unlisten(const std::string& channel, const channel_listener* listener);

  /// Channels with a subscription (for tests of what a cancelled wait leaves behind).
  std::size_t channels_in_use() const noexcept { return channels_.size(); }

  /// Drops both connections, as a lost connection would (for fault handling).
  void drop(const std::string& why);

 private:
  enum class subscription { subscribing, subscribed, unsubscribing };
  struct channel {
    subscription state = subscription::subscribing;
    std::vector<std::shared_ptr<channel_listener>> listeners;
  };

  static void on_subscription_reply(redisAsyncContext* context, void* raw_reply, void* privdata);
  void subscription_reply(const reply& message);
  void subscriber_down();
  void subscription_failed(const std::string& channel);
  void send_subscription(const char* verb, const std::string& channel);
  void notify(std::vector<std::shared_ptr<channel_listener>> listeners, channel_event event);

  boost::asio::any_io_executor executor_;
  server_settings settings_;
  std::string endpoint_;
  std::map<std::string, channel> channels_;
  connection commands_;
  connection subscriber_;
  sync_connections blocking_;
};

}  // namespace dlock::redis::detail
