// Private to dlock::redis: one server as the backend sees it, its command connection, its
// subscriber connection shared by every waiter, and its blocking pool.
//
// Everything here runs on the backend's network thread, except command_here().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "connection.hpp"
#include "sync_connections.hpp"

namespace dlock::redis::detail {

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
