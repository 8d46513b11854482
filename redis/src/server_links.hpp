// Private to dlock::redis: what the provider last knew of its connection to each server, for
// health() and the metrics sink's `reconnected`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dlock::redis::detail {

/// Each server's command connection reports here when it is ready and when it was lost or
/// could not be made; health() reads the servers that are down. Written on the network
/// thread, read from any thread.
class server_links {
 public:
  using link_id = std::uint64_t;

  struct unreachable_server {
    std::string endpoint;
    std::string why;
  };

  /// Runs on the network thread each time a connection that had been ready is ready again.
  /// Set before any connection is made.
  void on_reconnected(std::function<void()> hook) { reconnected_ = std::move(hook); }

  link_id add(std::string endpoint);
  void remove(link_id id);
  void ready(link_id id);
  void down(link_id id, std::string why);

  /// The servers whose connection is down, in the order they were added.
  std::vector<unreachable_server> unreachable() const;

 private:
  struct link {
    std::string endpoint;
    bool was_ready = false;
    std::optional<std::string> down_because;
  };

  mutable std::mutex mutex_;
  std::map<link_id, link> links_;
  link_id next_id_ = 0;
  std::function<void()> reconnected_;
};

}  // namespace dlock::redis::detail
