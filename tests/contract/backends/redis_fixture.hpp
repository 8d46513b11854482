// The contract's Redis fixture, shared by the executables that run the suite over each way of
// reaching Redis (redis.cpp: TCP and RedLock; redis_tls.cpp: TLS and a Unix socket;
// redis_sentinel.cpp: the master of a Sentinel deployment; redis_cluster.cpp: a Redis Cluster;
// redis_dotnet.cpp: .NET DistributedLock's key layout).
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "../../servers/redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace contract {

namespace redis_probes {

// `text` as a KEYS / PUBSUB CHANNELS pattern that matches only itself.
inline std::string glob_escaped(const std::string& text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

inline std::vector<std::string> elements(support::redis_connection& redis,
                                  const std::vector<std::string>& command) {
  auto reply = redis.command_elements(command);
  if (!reply) throw std::runtime_error("redis " + command.at(0) + " failed: " + redis.error());
  return *reply;
}

}  // namespace redis_probes

/// The contract's fixture for every way of reaching Redis: `url` is how dlock reaches the
/// servers (redis://, rediss:// with its options, redis+unix://), `probe_url` a plain redis://
/// URL of the same servers, which the probes (break_lock, server_footprint) use. With
/// `cluster`, the servers are a cluster's masters: a name's keys are on one of them, and its
/// waiters on that one's shard channels. With `layout` dotnet (the URL says layout=dotnet), a
/// name's locks are .NET's plain keys `<prefix><name>`, `<prefix><name>.writer` and
/// `.readers`, and its upgrade gate and election dlock's tagged keys.
class redis_fixture final : public backend_fixture {
 public:
  redis_fixture(std::string url, const std::string& probe_url, bool cluster = false,
                dlock::redis::key_layout layout = dlock::redis::key_layout::dlock)
      : endpoint_(std::move(url)),
        servers_(support::endpoint_hosts(probe_url)),
        cluster_(cluster),
        layout_(layout) {}

  // The provider's scheme(), whichever way it reaches the servers.
  std::string label() const override { return "redis"; }

  std::shared_ptr<dlock::provider> make_provider() override { return dlock::make_provider(url()); }

  std::string url() const override {
    const char separator = endpoint_.find('?') == std::string::npos ? '?' : '&';
    return endpoint_ + separator + "expiry=3s&prefix=" + prefix_;
  }

  leased_url nemesis_url() const override {
    const char separator = endpoint_.find('?') == std::string::npos ? '?' : '&';
    return {endpoint_ + separator + "expiry=2s&prefix=" + prefix_, std::chrono::seconds(2)};
  }

  // Every key of the name but its fencing counter (a lock's key, a reader-writer lock's writer
  // and readers, its upgrade gate). With RedLock a grant is on a majority of the nodes, not
  // always on all of them (a node may have refused it, or grant it a moment after the acquire
  // returned): it is broken once it is gone from a majority, which no extension can confirm.
  // The election's keys share the name's hash tag, so break_lock takes them too.
  void break_election(const std::string& name) override { break_lock(name); }

  void break_lock(const std::string& name) override {
    const std::size_t majority = cluster_ ? 1 : servers_.size() / 2 + 1;
    std::vector<bool> deleted(servers_.size(), false);
    const auto delete_where_present = [&] {
      std::size_t count = 0;
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        if (!deleted[i]) {
          support::redis_connection redis(servers_[i]);
          for (const std::string& key : keys_of(redis, name)) {
            if (redis.command({"DEL", key}) == "1") deleted[i] = true;
          }
        }
        count += deleted[i] ? 1 : 0;
      }
      return count >= majority;
    };
    if (!support::wait_until(delete_where_present)) {
      throw std::runtime_error("break_lock: no key for lock '" + name + "' on a majority of " +
                               std::to_string(servers_.size()) + " servers");
    }
  }

  // On every node: the keys of the name (with sorted-set members: grants, queued writers)
  // but its fencing counter, and the channels waiters of the name subscribe to.
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    std::vector<std::string> footprint;
    for (const auto& server : servers_) {
      support::redis_connection redis(server);
      const std::string at = std::to_string(server.port) + " ";
      for (const std::string& key : keys_of(redis, name)) {
        const std::string type = redis.command({"TYPE", key}).value_or("");
        if (type == "zset") {
          for (const std::string& member : redis_probes::elements(redis, {"ZRANGE", key, "0", "-1"})) {
            footprint.push_back(at + key + " member " + member);
          }
        } else {
          footprint.push_back(at + key + " " + type);
        }
      }
      for (const std::string& base : bases_of(name)) {
        for (const std::string& channel : redis_probes::elements(
                 redis, {"PUBSUB", "CHANNELS", redis_probes::glob_escaped(base) + "*"})) {
          const auto counted = redis_probes::elements(redis, {"PUBSUB", "NUMSUB", channel});
          footprint.push_back(at + "channel " + channel + " subscribers " + counted.at(1));
        }
        if (!cluster_) continue;
        for (const std::string& channel : redis_probes::elements(
                 redis, {"PUBSUB", "SHARDCHANNELS", redis_probes::glob_escaped(base) + "*"})) {
          const auto counted = redis_probes::elements(redis, {"PUBSUB", "SHARDNUMSUB", channel});
          footprint.push_back(at + "shard channel " + channel + " subscribers " + counted.at(1));
        }
      }
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // A waiting lock, writer, reader or semaphore subscribes to the name's release channel.
  bool footprint_shows_waiters(dlock::primitive) const override { return true; }
  // .NET's layout has no room for the hold's key beside the lock's (docs/redis.md).
  bool keeps_min_hold() const override { return layout_ == dlock::redis::key_layout::dlock; }
  bool pushes_leader_changes() const override { return true; }

  void acquire_from_unreachable_endpoint() override {
    // Sentinel: an unreachable sentinel, asked for the master the URL names.
    const std::string master =
        endpoint_.starts_with("redis+sentinel:") ? "/" + master_name() : std::string();
    auto locks = dlock::make_provider(endpoint_.substr(0, endpoint_.find("://") + 3) +
                                      unreachable_endpoint() + master);
    (void)locks->create_lock("x").try_acquire();
  }

  // Nothing listens on port 1 of the loopback interface (nor at that socket path): the
  // connection is refused.
  std::string unreachable_endpoint() const override {
    return endpoint_.starts_with("redis+unix:") ? "/nonexistent/dlock-contract.sock" : "127.0.0.1:1";
  }

 private:
  std::string endpoint_;
  std::vector<support::host_port> servers_;
  bool cluster_;
  dlock::redis::key_layout layout_;
  std::string prefix_ = support::unique_name("contract") + ":";

  std::string master_name() const {
    const std::string path = endpoint_.substr(endpoint_.find('/', endpoint_.find("://") + 3) + 1);
    return path.substr(0, path.find('?'));
  }

  // Where the name's keys begin: dlock's hash tag, and in .NET's layout the name as is.
  std::vector<std::string> bases_of(const std::string& name) const {
    std::vector<std::string> bases{
        dlock::redis::provider({.servers = {{"127.0.0.1", 6379}}, .key_prefix = prefix_})
            .lock_key(name)};
    if (layout_ == dlock::redis::key_layout::dotnet) bases.push_back(prefix_ + name);
    return bases;
  }

  // The name's keys on one server, but its fencing counters (which outlive every grant).
  std::vector<std::string> keys_of(support::redis_connection& redis, const std::string& name) {
    std::vector<std::string> keys;
    for (const std::string& base : bases_of(name)) {
      for (std::string& key :
           redis_probes::elements(redis, {"KEYS", redis_probes::glob_escaped(base) + "*"})) {
        if (key != base + ":fence" && key != base + ":dlock-fence") keys.push_back(std::move(key));
      }
    }
    return keys;
  }
};

}  // namespace contract
