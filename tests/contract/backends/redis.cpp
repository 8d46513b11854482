// The contract suite against dlock::redis on the test server (DLOCK_TEST_REDIS), with a short
// expiry so that losses show within a second.
#include <dlock/dlock.hpp>

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
    dlock::redis::provider locks({.servers = {{server_.host, static_cast<std::uint16_t>(server_.port)}},
                                  .key_prefix = prefix_});
    support::redis_connection connection(server_);
    if (connection.command({"DEL", locks.lock_key(name)}) != "1") {
      throw std::runtime_error("break_lock: no key for lock '" + name + "'");
    }
  }

  void acquire_from_unreachable_endpoint() override {
    auto locks = dlock::make_provider("redis://" + unreachable_endpoint());
    (void)locks->create_lock("x").try_acquire();
  }

  // Nothing listens on port 1 of the loopback interface: the connection is refused.
  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  std::string endpoint_ = support::require_test_server_endpoint("DLOCK_TEST_REDIS");
  support::host_port server_ = support::endpoint_hosts(endpoint_).at(0);
  std::string prefix_ = support::unique_name("contract") + ":";
};

}  // namespace

backend_fixture& backend() {
  static redis_fixture fixture;
  return fixture;
}

}  // namespace contract
