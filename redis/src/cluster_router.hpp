// Private to dlock::redis: a Redis Cluster as one server. Every command goes to the master of
// its key's hash slot, over that master's node (the same connections as a single server); the
// slot map comes from CLUSTER SLOTS, asked of the known masters and then the seeds, and is
// asked again when a redirection (MOVED) or a lost connection says it changed. ASK sends the
// one command on to the importing node after ASKING; TRYAGAIN (a script's keys split by a
// migration) is sent again after a moment.
//
// Every key of one name shares its hash tag (keys.hpp), so each script touches one slot, and
// the name's release channel, in the same tag, is a shard channel of that slot: waiters
// SSUBSCRIBE on the slot's master and releases SPUBLISH there.
//
// Everything here runs on the backend's network thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "keys.hpp"
#include "node.hpp"
#include "reply.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

class cluster_router {
 public:
  /// `seeds`: where to ask for the slot map first. `settings`: how to reach and log in to any
  /// node (its host and port replaced by the node's).
  cluster_router(boost::asio::any_io_executor executor, std::vector<server_settings> seeds,
                 heartbeat beat);
  ~cluster_router();
  cluster_router(const cluster_router&) = delete;
  cluster_router& operator=(const cluster_router&) = delete;

  /// "cluster host:port,host:port..." (the seeds), for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }

  /// Sends `arguments` to the master of its key's slot (EVAL and EVALSHA: the first key; any
  /// other command: its first argument), following redirections. A failure names the node.
  void command(std::vector<std::string> arguments, reply_handler done);
  /// Runs `which` on the master of the slot of `keys`.
  void eval(const script& which, const key_set& keys, const std::vector<std::string>& arguments,
            reply_handler done);

  /// The master of `key`'s slot as the map says, or the first seed before the map is known.
  node& node_for(const std::string& key);
  /// Every node known so far (an unsubscription goes to each, wherever the map put it).
  void for_each_node(const std::function<void(node&)>& visit);
  /// The masters of the slot map, asked for first when none is known yet: `done` gets them, or
  /// none and why no node gave a map.
  using masters_handler =
      dlock::detail::unique_function<void(std::vector<node*>, std::optional<std::string>)>;
  void masters(masters_handler done);

 private:
  struct routed;

  void send(std::shared_ptr<routed> command);
  void send_to(node& target, std::shared_ptr<routed> command, bool asking);
  void answered(node& asked, std::shared_ptr<routed> command, command_result result);
  void retry_later(std::shared_ptr<routed> command);
  void refresh();
  void ask_for_slots(std::vector<node*> candidates, std::size_t next,
                     std::vector<std::string> failures);
  void map_known(std::vector<std::string> failures);
  node& node_at(const std::string& host, std::uint16_t port);
  std::vector<node*> known_masters() const;

  boost::asio::any_io_executor executor_;
  std::vector<server_settings> seeds_;
  heartbeat heartbeat_;
  std::string endpoint_;
  /// Every node met (seeds, masters, redirection targets), by "host:port"; never removed, so
  /// that a reference handed out stays valid.
  std::map<std::string, std::unique_ptr<node>> nodes_;
  std::vector<node*> slots_;  ///< the master of each slot; null: not served (or not known)
  bool map_loaded_ = false;
  bool refreshing_ = false;
  bool refresh_again_ = false;
  std::vector<std::shared_ptr<routed>> waiting_for_map_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlock::redis::detail
