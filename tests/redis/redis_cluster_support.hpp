// What the Redis Cluster tests share: the redis-cluster group's URLs, where a key lives, and
// waiting for the watchdog's extension of a key on a node.
#pragma once

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlock/redis/provider.hpp>

#include "../servers/redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace redis_cluster_test {

using namespace std::chrono_literals;
using support::redis_connection;


inline const std::string& prefix() {
  static const std::string value = support::unique_name("redis-cluster-test") + ":";
  return value;
}

inline std::string url(const std::string& options) {
  return support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER") + "?prefix=" +
         prefix() + "&" + options;
}

inline std::vector<support::host_port> masters() {
  return support::endpoint_hosts(
      support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER_PLAIN"));
}

inline std::string lock_key(const std::string& name) {
  return dlock::redis::provider({.servers = {{"127.0.0.1", 6379}}, .key_prefix = prefix()})
      .lock_key(name);
}

inline std::string ask(const support::host_port& at, const std::vector<std::string>& command) {
  redis_connection redis(at);
  auto answer = redis.command(command);
  if (!answer) throw std::runtime_error("redis " + command.at(0) + " failed: " + redis.error());
  return *answer;
}

/// Which master serves `key`'s slot: the one that does not redirect a read of it.
inline std::size_t owner_of(const std::string& key) {
  const auto all = masters();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!ask(all[i], {"EXISTS", key}).starts_with("MOVED")) return i;
  }
  throw std::runtime_error("no master serves " + key);
}

/// One fresh name per master, in the masters' order.
inline std::vector<std::string> a_name_on_each_master() {
  std::map<std::size_t, std::string> found;
  for (int i = 0; found.size() < masters().size(); ++i) {
    const std::string name = "spread-" + std::to_string(i);
    found.try_emplace(owner_of(lock_key(name)), name);
  }
  std::vector<std::string> names;
  for (auto& [master, name] : found) names.push_back(name);
  return names;
}

/// `key`'s time to live in ms on `at`; with `asking`, read as the importing node of a
/// migrating slot serves it (after ASKING).
inline long long pttl(const support::host_port& at, const std::string& key, bool asking = false) {
  redis_connection redis(at);
  if (asking && redis.command({"ASKING"}) != "OK") throw std::runtime_error("ASKING failed");
  const auto left = redis.command({"PTTL", key});
  if (!left) throw std::runtime_error("PTTL failed: " + redis.error());
  return std::stoll(*left);
}

/// Waits until `key` on `at` has been extended: its time to live, once it fell below
/// `threshold`, rose above it again (only an extension raises it).
inline bool extended(const support::host_port& at, const std::string& key,
              std::chrono::milliseconds threshold, bool asking = false) {
  return support::wait_until(
             [&] {
               const long long left = pttl(at, key, asking);
               return left > 0 && left < threshold.count();
             },
             5s) &&
         support::wait_until([&] { return pttl(at, key, asking) > threshold.count(); }, 5s);
}

/// The replica of `master`, among the group's replicas.
inline support::host_port replica_of(const support::host_port& master) {
  for (const auto& replica : support::endpoint_hosts(
           support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER_REPLICAS"))) {
    if (support::redis_info_field(ask(replica, {"INFO", "replication"}), "master_port") ==
        std::to_string(master.port)) {
      return replica;
    }
  }
  throw std::runtime_error("no replica of 127.0.0.1:" + std::to_string(master.port));
}

}  // namespace redis_cluster_test
