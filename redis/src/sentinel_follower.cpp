#include "sentinel_follower.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace dlock::redis::detail {

sentinel_follower::sentinel_follower(boost::asio::any_io_executor executor,
                                     std::shared_ptr<sentinel_master> master)
    : executor_(executor), master_(std::move(master)), pause_(executor) {}

sentinel_follower::~sentinel_follower() { alive_.reset(); }

void sentinel_follower::start() {
  if (started_) return;
  started_ = true;
  follow(0);
}

void sentinel_follower::follow(std::size_t n) {
  retrying_ = false;
  const std::size_t index = master_->sentinel_index(n);
  link_ = std::make_unique<connection>(
      executor_, master_->sentinel(index), [this] { lost(); },
      [this](const reply& m) { message(m); });
  // Asked first, on the same connection: a switch announced while no sentinel was followed
  // shows in the answer.
  ask_for_master(*link_, master_->name(),
                 [this, alive = std::weak_ptr<bool>(alive_), index](
                     std::optional<master_address> at, const std::string&) {
                   if (alive.expired()) return;
                   if (at) master_->learned(index, *at);
                 });
  link_->subscription_command({"SUBSCRIBE", "+switch-master"},
                              [this](const std::string&) { lost(); });
}

// "+switch-master" carries "<name> <old ip> <old port> <new ip> <new port>".
void sentinel_follower::message(const reply& m) {
  if (m.type != reply::kind::array || m.elements.size() < 3 || m.elements[0].text != "message") {
    return;
  }
  std::istringstream words(m.elements[2].text);
  std::string name, old_host, new_host;
  unsigned old_port = 0, new_port = 0;
  if (!(words >> name >> old_host >> old_port >> new_host >> new_port)) return;
  if (name != master_->name() || new_port == 0 || new_port > 65535) return;
  master_->switched(new_host, static_cast<std::uint16_t>(new_port));
}

// The sentinel went away (or never answered): the next one, after a pause, so that sentinels
// that are all down are not asked in a tight loop.
void sentinel_follower::lost() {
  if (retrying_) return;
  retrying_ = true;
  pause_.expires_after(std::min<std::chrono::nanoseconds>(
      std::chrono::milliseconds(100), master_->sentinel(0).command_timeout));
  pause_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& e) {
    if (alive.expired() || e) return;
    follow(++turn_);
  });
}

}  // namespace dlock::redis::detail
