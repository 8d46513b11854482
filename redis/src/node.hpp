// Private to dlock::redis: one server as the backend sees it, its command connection, its
// subscriber connection shared by every waiter (kept honest by a heartbeat), and its blocking
// pool.
//
// Everything here runs on the backend's network thread, except command_here().
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "connection.hpp"
#include "server_links.hpp"
#include "sync_connections.hpp"

namespace dlock::redis::detail {

/// What a waiter hears on its name's release channel.
enum class channel_event { subscribed, released, lost };

class channel_listener {
 public:
  virtual ~channel_listener() = default;
  /// Runs on the network thread, never inside node::listen or node::unlisten.
  virtual void on_channel_event(channel_event event) = 0;
  /// A message on the channel, `text` as published: by default `released`.
  virtual void on_channel_message(const std::string& text) {
    (void)text;
    on_channel_event(channel_event::released);
  }
};

/// Release channels as Redis's plain pub/sub (SUBSCRIBE, PUBLISH: one server, or a message
/// every node of a cluster relays), or as a cluster's shard channels (SSUBSCRIBE, SPUBLISH:
/// only the master of the channel's slot).
enum class channel_kind { plain, sharded };

/// How the subscriber connection proves it is alive while it carries channels: every `every`
/// it subscribes again to `channel` (a channel of its own that nobody publishes on; the server
/// answers a repeated SUBSCRIBE with a confirmation, which reaches the subscriber's handler
/// like any other).
struct heartbeat {
  std::string channel;
  std::chrono::nanoseconds every;
};

/// One server: a command connection and one subscriber connection shared by every waiter of
/// the provider, with one SUBSCRIBE per channel however many wait on it.
///
/// A subscriber connection that is silent (a paused server, a partition: nothing is refused,
/// nothing arrives) would leave its waiters deaf without any error. So while it carries
/// channels it sends a heartbeat, and drops itself when one goes unanswered for a command
/// timeout: its listeners hear `lost`, listen again and so subscribe again on a new connection
/// once the server answers.
///
/// With `links`, the command connection reports there whether it is up; while it is down (lost,
/// or refused) it is made again, at once after a loss and then every `relink_every`, so that
/// health() sees the server come back without waiting for a command.
class node {
 public:
  node(boost::asio::any_io_executor executor, server_settings settings, heartbeat beat,
       channel_kind channels = channel_kind::plain, std::shared_ptr<server_links> links = {});
  ~node();

  /// "host:port" (or the Unix socket's path), for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }
  const server_settings& settings() const noexcept { return settings_; }

  void command(std::vector<std::string> arguments, reply_handler done) {
    commands_.command(std::move(arguments), std::move(done));
  }
  /// Sends `arguments` on a blocking connection from the calling thread (any thread). The
  /// first call also has the network thread open the command connection meanwhile: an acquire
  /// that goes on to wait there then finds it ready, rather than sending its try behind a
  /// handshake (a TLS one takes a while) that may outlast its timeout.
  command_result command_here(const std::vector<std::string>& arguments) {
    if (!command_connection_opened_.exchange(true)) {
      boost::asio::post(executor_, [this] { commands_.open(); });
    }
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

  /// When the subscriber connection last answered (a subscription, a message, a heartbeat);
  /// the clock's epoch if it never did. A waiter that hears nothing from a quorum of its
  /// servers for an expiry gives up.
  std::chrono::steady_clock::time_point subscriber_heard_at() const noexcept {
    return heard_at_;
  }

 private:
  enum class subscription { subscribing, subscribed, unsubscribing };
  struct channel {
    subscription state = subscription::subscribing;
    std::vector<std::shared_ptr<channel_listener>> listeners;
  };

  void subscription_reply(const reply& message);
  void shard_channel_refused();
  void subscriber_down();
  void subscription_failed(const std::string& channel);
  void send_subscription(const char* verb, const std::string& channel);
  void notify(std::vector<std::shared_ptr<channel_listener>> listeners, channel_event event);
  void deliver(std::vector<std::shared_ptr<channel_listener>> listeners, std::string text);
  void start_heartbeat();
  void arm_heartbeat(std::chrono::steady_clock::time_point at);
  void beat();
  void link_changed(const std::string* failure);

  static constexpr std::chrono::seconds relink_every{1};

  boost::asio::any_io_executor executor_;
  server_settings settings_;
  std::string endpoint_;
  std::map<std::string, channel> channels_;
  connection commands_;
  connection subscriber_;
  sync_connections blocking_;
  std::atomic<bool> command_connection_opened_{false};
  heartbeat heartbeat_;
  channel_kind channel_kind_;
  boost::asio::steady_timer heartbeat_timer_;
  bool heartbeat_running_ = false;
  /// When the unanswered heartbeat was sent.
  std::optional<std::chrono::steady_clock::time_point> heartbeat_sent_;
  std::chrono::steady_clock::time_point heard_at_{};
  std::shared_ptr<server_links> links_;
  server_links::link_id link_id_ = 0;
  bool link_was_up_ = false;
  boost::asio::steady_timer relink_timer_;
};

}  // namespace dlock::redis::detail
