// list_locks in a Redis Cluster SCANs every master: names held on each are all listed, by a
// provider that asks for the slot map first.
#include <catch2/catch.hpp>

#include <set>

#include <dlock/dlock.hpp>

#include "redis_cluster_support.hpp"

using namespace redis_cluster_test;

TEST_CASE("list_locks in a cluster lists the names held on every master", "[redis][cluster]") {
  auto locks = dlock::make_provider(url("expiry=10s"));
  const auto names = a_name_on_each_master();
  std::vector<dlock::lock_handle> held;
  for (const auto& name : names) held.push_back(locks->create_lock(name).acquire(5s));
  // A provider that sent nothing yet: it has no slot map until list_locks asks for one.
  auto observer = dlock::make_provider(url("expiry=10s"));
  std::set<std::string> listed;
  for (const auto& found : observer->list_locks("spread-")) {
    CHECK(found.holders.size() == 1);
    listed.insert(found.name);
  }
  CHECK(listed == std::set<std::string>(names.begin(), names.end()));
}
