// The contract suite against dlock::etcd on the standalone test server (or, built as
// dlock_contract_etcd_cluster, on the 3-member cluster), under a key prefix of its own.
#include <algorithm>
#include <memory>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "etcd_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

#ifndef DLOCK_CONTRACT_ETCD_ENDPOINT
#define DLOCK_CONTRACT_ETCD_ENDPOINT "DLOCK_TEST_ETCD"
#endif

namespace contract {

namespace {

using namespace std::chrono_literals;

// Short leases keep the cases about killed holders quick.
constexpr auto lease_ttl = 3s;

class etcd_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "etcd"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::etcd::provider>(
        dlock::etcd::options{.endpoints = endpoints_, .prefix = prefix_, .lease_ttl = lease_ttl});
  }

  std::string url() const override {
    return endpoint_ + "/" + prefix_.substr(0, prefix_.size() - 1) + "?lease=3s";
  }

  leased_url nemesis_url() const override {
    return {endpoint_ + "/" + prefix_.substr(0, prefix_.size() - 1) + "?lease=2s", 2s};
  }

  void break_lock(const std::string& name) override {
    for (const std::string& queue : queues_of(name)) {
      support::etcdctl(endpoints_, {"del", "--prefix", queue});
    }
  }

  // Deletes every candidate's key, the leader's first: its watch marks the lead lost.
  void break_election(const std::string& name) override {
    support::etcdctl(endpoints_, {"del", "--prefix", election_queue_of(name)});
  }

  // Every key queued under the name's queues (lock, reader-writer lock, semaphore, upgrade gate).
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    std::vector<std::string> footprint;
    for (const std::string& queue : queues_of(name)) {
      for (std::string& key : support::etcd_keys(endpoints_, queue)) {
        footprint.push_back(std::move(key));
      }
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // Every waiter queues a key.
  bool footprint_shows_waiters(dlock::primitive) const override { return true; }
  // On a lease of the time left (docs/etcd.md, "Minimum hold").
  bool keeps_min_hold() const override { return true; }
  bool pushes_leader_changes() const override { return true; }

  // etcd keeps no time per key.
  bool inspect_sees_since() const override { return false; }

  void acquire_from_unreachable_endpoint() override {
    auto etcd = std::make_shared<dlock::etcd::provider>(dlock::etcd::options{
        .endpoints = unreachable_endpoint(), .connect_timeout = 1s});
    (void)etcd->create_lock("x").try_acquire();
  }

  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  std::string endpoint_ = support::require_test_server_endpoint(DLOCK_CONTRACT_ETCD_ENDPOINT);
  std::string endpoints_ = support::etcd_endpoints(endpoint_);
  std::string prefix_ = support::unique_name("dlock-contract") + "/";
  std::unique_ptr<dlock::etcd::provider> names_;  // made on first use: maps names to keys

  // docs/etcd.md's layout: <prefix><kind segment><escaped name>/.
  std::string escaped_name(const std::string& name) {
    if (!names_) {
      names_ = std::make_unique<dlock::etcd::provider>(
          dlock::etcd::options{.endpoints = endpoints_, .prefix = prefix_});
    }
    return names_->lock_key_prefix(name).substr(prefix_.size());
  }
  std::string election_queue_of(const std::string& name) {
    return prefix_ + ".election/" + escaped_name(name);
  }
  std::vector<std::string> queues_of(const std::string& name) {
    const std::string escaped = escaped_name(name);
    return {prefix_ + escaped, prefix_ + ".rw/" + escaped, prefix_ + ".semaphore/" + escaped,
            prefix_ + ".upgrade-gate/" + escaped};
  }
};

}  // namespace

backend_fixture& backend() {
  static etcd_fixture instance;
  return instance;
}

}  // namespace contract
