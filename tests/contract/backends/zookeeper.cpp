// The contract suite against dlock::zookeeper on the standalone test server (or, built as
// dlock_contract_zookeeper_ensemble, on the 3-node ensemble), under a base path of its own.
#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"

#ifndef DLOCK_CONTRACT_ZOOKEEPER_ENDPOINT
#define DLOCK_CONTRACT_ZOOKEEPER_ENDPOINT "DLOCK_TEST_ZOOKEEPER"
#endif

namespace contract {

namespace {

using namespace std::chrono_literals;

// Short sessions keep the cases about killed holders quick; the server allows 1 s and more.
constexpr auto session_timeout = 4s;

class zookeeper_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "zookeeper"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
        .hosts = hosts_, .base_path = base_path_, .session_timeout = session_timeout});
  }

  std::string url() const override { return endpoint_ + base_path_ + "?session_timeout=4s"; }

  void break_lock(const std::string& name) override {
    const std::string node = dlock::zookeeper::provider({.hosts = hosts_, .base_path = base_path_})
                                 .lock_node_path(name);
    support::zookeeper_session session(hosts_);
    for (const std::string& parent : {node, node + "/leases"}) {
      for (const std::string& child : session.children(parent)) {
        if (child != "leases" && child != "locks") session.remove(parent + "/" + child);
      }
    }
  }

  void acquire_from_unreachable_endpoint() override {
    auto zk = std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
        .hosts = unreachable_endpoint(), .connect_timeout = 1s});
    (void)zk->create_lock("x").try_acquire();
  }

  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  std::string endpoint_ = support::require_test_server_endpoint(DLOCK_CONTRACT_ZOOKEEPER_ENDPOINT);
  std::string hosts_ = support::zookeeper_hosts(endpoint_);
  std::string base_path_ = "/" + support::unique_name("dlock-contract");
};

}  // namespace

backend_fixture& backend() {
  static zookeeper_fixture instance;
  return instance;
}

}  // namespace contract
