// The contract suite against dlock::redis, with a short expiry so that losses show within a
// second: on the single test server (DLOCK_TEST_REDIS), or, built with DLOCK_CONTRACT_REDLOCK,
// RedLock over the three redlock servers (DLOCK_TEST_REDLOCK).
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

class redis_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "redis"; }

  std::shared_ptr<dlock::provider> make_provider() override { return dlock::make_provider(url()); }

  std::string url() const override { return endpoint_ + "?expiry=3s&prefix=" + prefix_; }

  void break_lock(const std::string& name) override {
    const std::string key =
        dlock::redis::provider({.servers = {{"127.0.0.1", 6379}}, .key_prefix = prefix_})
            .lock_key(name);
    // On every node: with RedLock the grant is then gone from all of its majority.
    for (const auto& server : servers_) {
      if (support::redis_connection(server).command({"DEL", key}) != "1") {
        throw std::runtime_error("break_lock: no key for lock '" + name + "' on port " +
                                 std::to_string(server.port));
      }
    }
  }

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
};

}  // namespace

backend_fixture& backend() {
  static redis_fixture fixture;
  return fixture;
}

}  // namespace contract
