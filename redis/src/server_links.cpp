#include "server_links.hpp"

namespace dlock::redis::detail {

server_links::link_id server_links::add(std::string endpoint) {
  std::lock_guard lock(mutex_);
  const link_id id = next_id_++;
  links_.emplace(id, link{.endpoint = std::move(endpoint)});
  return id;
}

void server_links::remove(link_id id) {
  std::lock_guard lock(mutex_);
  links_.erase(id);
}

void server_links::ready(link_id id) {
  bool reconnected = false;
  {
    std::lock_guard lock(mutex_);
    auto it = links_.find(id);
    if (it == links_.end()) return;
    // A first connection that needed several attempts is no reconnection.
    reconnected = it->second.was_ready && it->second.down_because.has_value();
    it->second.was_ready = true;
    it->second.down_because.reset();
  }
  if (reconnected && reconnected_) reconnected_();
}

void server_links::down(link_id id, std::string why) {
  std::lock_guard lock(mutex_);
  if (auto it = links_.find(id); it != links_.end()) it->second.down_because = std::move(why);
}

std::vector<server_links::unreachable_server> server_links::unreachable() const {
  std::vector<unreachable_server> down;
  std::lock_guard lock(mutex_);
  for (const auto& [id, l] : links_) {
    if (l.down_because) down.push_back({l.endpoint, *l.down_because});
  }
  return down;
}

}  // namespace dlock::redis::detail
