// The contract suite against dlock::redis, with a short expiry so that losses show within a
// second: on the single test server (DLOCK_TEST_REDIS), or, built with DLOCK_CONTRACT_REDLOCK,
// RedLock over the three redlock servers (DLOCK_TEST_REDLOCK).
#include <algorithm>

#include <dlock/dlock.hpp>

#ifdef DLOCK_CONTRACT_REDLOCK
constexpr const char* endpoint_variable = "DLOCK_TEST_REDLOCK";
#else
constexpr const char* endpoint_variable = "DLOCK_TEST_REDIS";
#endif

#include "../backend.hpp"
#include "../../servers/redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace contract {

namespace {

// `text` as a KEYS / PUBSUB CHANNELS pattern that matches only itself.
std::string glob_escaped(const std::string& text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::vector<std::string> elements(support::redis_connection& redis,
                                  const std::vector<std::string>& command) {
  auto reply = redis.command_elements(command);
  if (!reply) throw std::runtime_error("redis " + command.at(0) + " failed: " + redis.error());
  return *reply;
}

class redis_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "redis"; }

  std::shared_ptr<dlock::provider> make_provider() override { return dlock::make_provider(url()); }

  std::string url() const override { return endpoint_ + "?expiry=3s&prefix=" + prefix_; }

  // Every key of the name but its fencing counter (a lock's key, a reader-writer lock's
  // writer and readers, its upgrade gate), on every node. With RedLock a grant needs only a
  // majority (a slow node's part may come later or not at all), so a node without keys is no
  // error; the grant is then gone from all of its majority.
  void break_lock(const std::string& name) override {
    const std::string base = key_of(name);
    int deleted = 0;
    for (const auto& server : servers_) {
      support::redis_connection redis(server);
      for (const std::string& key : elements(redis, {"KEYS", glob_escaped(base) + "*"})) {
        if (key != base + ":fence" && redis.command({"DEL", key}) == "1") ++deleted;
      }
    }
    if (deleted == 0) throw std::runtime_error("break_lock: no key for lock '" + name + "'");
  }

  // On every node: the keys of the name (with sorted-set members: grants, queued writers)
  // but its fencing counter, and the channels waiters of the name subscribe to.
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    const std::string base = key_of(name);
    std::vector<std::string> footprint;
    for (const auto& server : servers_) {
      support::redis_connection redis(server);
      const std::string at = std::to_string(server.port) + " ";
      for (const std::string& key : elements(redis, {"KEYS", glob_escaped(base) + "*"})) {
        if (key == base + ":fence") continue;
        const std::string type = redis.command({"TYPE", key}).value_or("");
        if (type == "zset") {
          for (const std::string& member : elements(redis, {"ZRANGE", key, "0", "-1"})) {
            footprint.push_back(at + key + " member " + member);
          }
        } else {
          footprint.push_back(at + key + " " + type);
        }
      }
      for (const std::string& channel :
           elements(redis, {"PUBSUB", "CHANNELS", glob_escaped(base) + "*"})) {
        const auto counted = elements(redis, {"PUBSUB", "NUMSUB", channel});
        footprint.push_back(at + "channel " + channel + " subscribers " + counted.at(1));
      }
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // A waiting lock, writer, reader or semaphore subscribes to the name's release channel.
  bool footprint_shows_waiters(dlock::primitive) const override { return true; }
  bool checks_max_count_at_acquire() const override { return true; }
  // A writer that waits queues itself (<key>:rw:waiting), and readers do not pass the queue; on
  // RedLock a majority of nodes refuses them.
  bool prefers_writers() const override { return true; }

  void acquire_from_unreachable_endpoint() override {
    auto locks = dlock::make_provider("redis://" + unreachable_endpoint());
    (void)locks->create_lock("x").try_acquire();
  }

  // Nothing listens on port 1 of the loopback interface: the connection is refused.
  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  std::string endpoint_ = support::require_test_server_endpoint(endpoint_variable);
  std::vector<support::host_port> servers_ = support::endpoint_hosts(endpoint_);
  std::string prefix_ = support::unique_name("contract") + ":";

  std::string key_of(const std::string& name) const {
    return dlock::redis::provider({.servers = {{"127.0.0.1", 6379}}, .key_prefix = prefix_})
        .lock_key(name);
  }
};

}  // namespace

backend_fixture& backend() {
  static redis_fixture fixture;
  return fixture;
}

}  // namespace contract
