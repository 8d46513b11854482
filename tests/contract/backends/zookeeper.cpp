// The contract suite against dlock::zookeeper on the standalone test server (or, built as
// dlock_contract_zookeeper_ensemble, on the 3-node ensemble), under a base path of its own.
#include <algorithm>
#include <memory>

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

  // The test server's minSessionTimeout is 1 s (scripts/test-servers/zookeeper.sh).
  leased_url nemesis_url() const override {
    return {endpoint_ + base_path_ + "?session_timeout=2s", 2s};
  }

  // Removes the holders' nodes: a lock's or reader-writer lock's, a semaphore's leases and a
  // reader-writer lock's upgrade gate (not an election's candidates, which share the node).
  void break_lock(const std::string& name) override {
    const std::string node = node_of(name);
    support::zookeeper_session session(hosts_);
    for (const std::string& parent : {node, node + "/leases", node + "/upgrade-gate"}) {
      for (const std::string& child : session.children(parent)) {
        if (!is_container(child) && !is_candidate(child)) session.remove(parent + "/" + child);
      }
    }
  }

  // Removes the election's candidates (Curator's LeaderLatch nodes, docs/election.md), the
  // leader's among them.
  void break_election(const std::string& name) override {
    const std::string node = node_of(name);
    support::zookeeper_session session(hosts_);
    for (const std::string& child : session.children(node)) {
      if (is_candidate(child)) session.remove(node + "/" + child);
    }
  }

  bool pushes_leader_changes() const override { return true; }

  // The contenders' nodes below the name's node: a lock's or reader-writer lock's children, a
  // semaphore's leases and the nodes of its internal lock, the upgrade gate's; the (container)
  // parents are left out, as the server reaps them when it likes.
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    const std::string node = node_of(name);
    if (!session_) session_ = std::make_unique<support::zookeeper_session>(hosts_);
    session_->sync();  // an ensemble member may not have applied the holders' writes yet
    std::vector<std::string> footprint;
    for (const std::string below : {"", "/leases", "/locks", "/upgrade-gate"}) {
      for (const std::string& child : session_->children(node + below)) {
        if (below.empty() && is_container(child)) continue;
        footprint.push_back(below + "/" + child);
      }
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // Every waiter queues a sequential node (a semaphore's while it holds the internal lock).
  bool footprint_shows_waiters(dlock::primitive) const override { return true; }
  // By TTL nodes, which the test servers take (scripts/test-servers/zookeeper.sh).
  bool keeps_min_hold() const override { return true; }

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
  // Made on first use: server_footprint's session, and a provider that maps names to nodes.
  std::unique_ptr<support::zookeeper_session> session_;
  std::unique_ptr<dlock::zookeeper::provider> names_;

  // The containers below a name's node (docs/zookeeper.md), which hold contenders' nodes.
  static bool is_container(const std::string& child) {
    return child == "leases" || child == "locks" || child == "upgrade-gate";
  }
  static bool is_candidate(const std::string& child) {
    return child.find("-latch-") != std::string::npos;
  }

  std::string node_of(const std::string& name) {
    if (!names_) {
      names_ = std::make_unique<dlock::zookeeper::provider>(
          dlock::zookeeper::options{.hosts = hosts_, .base_path = base_path_});
    }
    return names_->lock_node_path(name);
  }
};

}  // namespace

backend_fixture& backend() {
  static zookeeper_fixture instance;
  return instance;
}

}  // namespace contract
