#include "node.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

#include "transport.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

}  // namespace

node::node(boost::asio::any_io_executor executor, server_settings settings, heartbeat beat,
           channel_kind channels, std::shared_ptr<server_links> links)
    : executor_(executor),
      settings_(std::move(settings)),
      endpoint_(endpoint_text(settings_)),
      commands_(executor, settings_),
      subscriber_(
          executor, settings_, [this] { subscriber_down(); },
          [this](const reply& message) { subscription_reply(message); }),
      blocking_(settings_),
      heartbeat_(std::move(beat)),
      channel_kind_(channels),
      heartbeat_timer_(executor),
      links_(std::move(links)),
      relink_timer_(executor) {
  if (!links_) return;
  link_id_ = links_->add(endpoint_);
  commands_.watch_link([this](const std::string* failure) { link_changed(failure); });
}

node::~node() {
  if (links_) links_->remove(link_id_);
}

void node::link_changed(const std::string* failure) {
  if (!failure) {
    link_was_up_ = true;
    relink_timer_.cancel();
    links_->ready(link_id_);
    return;
  }
  links_->down(link_id_, *failure);
  // A lost connection is made again at once (a killed connection, a Sentinel switch: the
  // server is likely there); one that could not be made, a moment later.
  const bool lost = std::exchange(link_was_up_, false);
  relink_timer_.expires_after(lost ? std::chrono::nanoseconds(0) : relink_every);
  relink_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) commands_.open();
  });
}

void node::drop(const std::string& why) {
  commands_.drop(why);
  subscriber_.drop(why);
}

void node::send_subscription(const char* verb, const std::string& name) {
  // The verbs are spelled the plain way here; a shard channel's are the same with an S.
  std::string spelled = channel_kind_ == channel_kind::sharded ? std::string("S") + verb : verb;
  subscriber_.subscription_command({std::move(spelled), name},
                                   [this, name](const std::string&) { subscription_failed(name); });
}

void node::listen(const std::string& name, const std::shared_ptr<channel_listener>& listener) {
  auto [it, created] = channels_.try_emplace(name);
  auto& listeners = it->second.listeners;
  // Listening again is a no-op: a RedLock acquire re-listens on every node after one node's
  // subscription was lost, and must not be told twice (or kept twice) by the others.
  if (std::find(listeners.begin(), listeners.end(), listener) != listeners.end()) return;
  listeners.push_back(listener);
  if (created) {
    send_subscription("SUBSCRIBE", name);
    start_heartbeat();
  } else if (it->second.state == subscription::subscribed) {
    notify({listener}, channel_event::subscribed);
  }
}

void node::unlisten(const std::string& name, const channel_listener* listener) {
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  auto& listeners = it->second.listeners;
  std::erase_if(listeners, [listener](const auto& l) { return l.get() == listener; });
  if (listeners.empty() && it->second.state == subscription::subscribed) {
    it->second.state = subscription::unsubscribing;
    send_subscription("UNSUBSCRIBE", name);
  }
}

void node::notify(std::vector<std::shared_ptr<channel_listener>> listeners, channel_event event) {
  boost::asio::post(executor_, [listeners = std::move(listeners), event] {
    for (const auto& listener : listeners) listener->on_channel_event(event);
  });
}

void node::deliver(std::vector<std::shared_ptr<channel_listener>> listeners, std::string text) {
  boost::asio::post(executor_, [listeners = std::move(listeners), text = std::move(text)] {
    for (const auto& listener : listeners) listener->on_channel_message(text);
  });
}

void node::subscription_reply(const reply& message) {
  if (message.is_error() && channel_kind_ == channel_kind::sharded) {
    shard_channel_refused();
    return;
  }
  if (message.type != reply::kind::array || message.elements.size() < 2) return;
  heard_at_ = clock::now();
  std::string verb = message.elements[0].text;
  // A shard channel's confirmations and messages, read as the plain ones.
  if (verb == "ssubscribe" || verb == "smessage" || verb == "sunsubscribe") verb.erase(0, 1);
  if (message.elements[1].text == heartbeat_.channel) {
    if (verb == "subscribe" && heartbeat_sent_) {
      heartbeat_sent_.reset();
      arm_heartbeat(heard_at_ + heartbeat_.every);
    }
    return;
  }
  auto it = channels_.find(message.elements[1].text);
  if (it == channels_.end()) return;
  channel& c = it->second;
  if (verb == "subscribe") {
    if (c.listeners.empty()) {
      c.state = subscription::unsubscribing;
      send_subscription("UNSUBSCRIBE", it->first);
    } else {
      c.state = subscription::subscribed;
      notify(c.listeners, channel_event::subscribed);
    }
  } else if (verb == "message") {
    deliver(c.listeners, message.elements.size() > 2 ? message.elements[2].text : std::string());
  } else if (verb == "unsubscribe" && c.state == subscription::subscribed) {
    // Unasked: the channel's slot moved to another node. Its listeners listen again, where the
    // slot map (which their next try refreshes) says it is now.
    auto listeners = std::move(c.listeners);
    channels_.erase(it);
    notify(std::move(listeners), channel_event::lost);
  } else if (verb == "unsubscribe" && c.state == subscription::unsubscribing) {
    if (c.listeners.empty()) {
      channels_.erase(it);
    } else {
      // Listeners came while the UNSUBSCRIBE was in flight: subscribe again for them.
      c.state = subscription::subscribing;
      send_subscription("SUBSCRIBE", it->first);
    }
  }
}

// A (UN)SUBSCRIBE that never reached the server (it was down, or the log-in failed): the
// channel is forgotten and its listeners hear `lost`, as after subscriber_down(), so that
// they listen again. Told after a pause, so that a server that stays down is not asked in a
// tight loop of listen, fail, retry.
void node::subscription_failed(const std::string& name) {
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  auto listeners = std::move(it->second.listeners);
  channels_.erase(it);
  if (listeners.empty()) return;
  auto pause = std::make_shared<boost::asio::steady_timer>(executor_);
  pause->expires_after(std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(100),
                                                          settings_.command_timeout));
  pause->async_wait([pause, listeners = std::move(listeners)](const boost::system::error_code&) {
    for (const auto& listener : listeners) listener->on_channel_event(channel_event::lost);
  });
}

// An SSUBSCRIBE refused (MOVED: this node does not serve the channel's slot). The error names
// no channel, so every channel still waiting for its confirmation is failed, as if it never
// reached the server: its listeners try again, and listen where the slot map then says.
void node::shard_channel_refused() {
  std::vector<std::string> unconfirmed;
  for (const auto& [name, c] : channels_) {
    if (c.state == subscription::subscribing) unconfirmed.push_back(name);
  }
  for (const auto& name : unconfirmed) subscription_failed(name);
}

void node::start_heartbeat() {
  if (heartbeat_running_) return;
  heartbeat_running_ = true;
  arm_heartbeat(clock::now() + heartbeat_.every);
}

void node::arm_heartbeat(clock::time_point at) {
  heartbeat_timer_.expires_at(at);  // cancels the wait armed before
  heartbeat_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) beat();
  });
}

// Runs while channels are subscribed (or being subscribed): sends a heartbeat every period,
// and drops the connection when one has gone unanswered for a command timeout.
void node::beat() {
  if (channels_.empty()) {
    heartbeat_running_ = false;
    heartbeat_sent_.reset();
    return;
  }
  const auto now = clock::now();
  if (heartbeat_sent_) {
    if (now - *heartbeat_sent_ < settings_.command_timeout) {
      arm_heartbeat(*heartbeat_sent_ + settings_.command_timeout);
      return;
    }
    heartbeat_sent_.reset();
    subscriber_.drop("no reply to the heartbeat within " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        settings_.command_timeout)
                                        .count()) +
                     " ms");
    arm_heartbeat(now + heartbeat_.every);
    return;
  }
  heartbeat_sent_ = now;
  subscriber_.subscription_command({"SUBSCRIBE", heartbeat_.channel},
                                   [this](const std::string&) { heartbeat_sent_.reset(); });
  arm_heartbeat(now + settings_.command_timeout);
}

void node::subscriber_down() {
  heartbeat_sent_.reset();  // it went with the connection; the next beat sends a new one
  std::vector<std::shared_ptr<channel_listener>> everyone;
  for (auto& [name, c] : channels_) {
    everyone.insert(everyone.end(), c.listeners.begin(), c.listeners.end());
  }
  channels_.clear();
  notify(std::move(everyone), channel_event::lost);
}

}  // namespace dlock::redis::detail
