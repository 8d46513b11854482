// dlock::etcd under faults: a member restarted, the cluster's leader killed, a majority of the
// cluster down, a paused member. These kill, pause and restart servers that other tests share,
// so they run alone (RUN_SERIAL) and leave the servers healthy.
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <sstream>

#include <dlock/dlock.hpp>

#include "etcd_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

constexpr auto lease_ttl = 3s;
// Lost within the TTL; the margin covers a keepalive round and the io thread's turn.
constexpr auto loss_bound = lease_ttl + 2s;

std::string standalone() {
  return support::etcd_endpoints(support::require_test_server_endpoint("DLOCK_TEST_ETCD"));
}
std::string cluster() {
  return support::etcd_endpoints(support::require_test_server_endpoint("DLOCK_TEST_ETCD_CLUSTER"));
}

std::shared_ptr<dlock::etcd::provider> make_etcd(const std::string& endpoints,
                                                 const std::string& prefix) {
  return std::make_shared<dlock::etcd::provider>(
      dlock::etcd::options{.endpoints = endpoints, .prefix = prefix, .lease_ttl = lease_ttl});
}

// The test-server id (etcd1..etcd3) of the cluster's leader, from `etcdctl endpoint status`
// ("endpoint, id, version, db size, is leader, ...", one line per member in endpoint order).
std::string cluster_leader() {
  std::istringstream lines(support::etcdctl(cluster(), {"endpoint", "status"}));
  std::string line;
  for (int member = 1; std::getline(lines, line); ++member) {
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; i < 5 && std::getline(fields, field, ','); ++i) {
    }
    if (field == " true") return "etcd" + std::to_string(member);
  }
  throw std::runtime_error("no leader in: " + lines.str());
}

// Lost within a whole loss bound: a check that must stay false that long.
bool lost_within(const dlock::lock_handle& held, std::chrono::milliseconds bound) {
  return wait_until([&] { return held.lost(); }, bound);
}

}  // namespace

TEST_CASE("a held lock outlives a restart of its member: keepalives go on, and release and "
          "acquire work after it", "[etcd][fault]") {
  const std::string prefix = unique_name("restart") + "/";
  // A TTL well above a restart's few seconds: the holder cannot tell a restart from a cut-off
  // member that expires its lease, so an outage of a TTL loses the lock (as it must).
  constexpr auto long_ttl = 8s;
  auto etcd = std::make_shared<dlock::etcd::provider>(
      dlock::etcd::options{.endpoints = standalone(), .prefix = prefix, .lease_ttl = long_ttl});
  auto held = etcd->create_lock("job").acquire(10s);
  support::test_servers({"restart", "etcd"});
  // Past a TTL after the restart: the lease was renewed over the new connection, or the handle
  // would be lost by now.
  CHECK_FALSE(lost_within(held, long_ttl + 1s));
  CHECK(support::etcd_keys(standalone(), prefix).size() == 1);
  CHECK_FALSE(etcd->create_lock("job").try_acquire());
  held.release();
  CHECK(support::etcd_keys(standalone(), prefix).empty());
  auto again = etcd->create_lock("job").acquire(10s);
  CHECK(again.fencing_token() > held.fencing_token());
}

TEST_CASE("a waiter keeps waiting through a restart of its member, and is granted after the "
          "holder's release", "[etcd][fault]") {
  const std::string prefix = unique_name("restart-wait") + "/";
  auto holder = make_etcd(standalone(), prefix);
  auto waiter = make_etcd(standalone(), prefix);
  auto held = holder->create_lock("job").acquire(10s);
  auto waiting = waiter->create_lock("job").async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return support::etcd_keys(standalone(), prefix).size() == 2; }));
  support::test_servers({"restart", "etcd"});
  CHECK(waiting.wait_for(lease_ttl) == std::future_status::timeout);
  held.release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK(waiting.get().fencing_token() > held.fencing_token());
}

TEST_CASE("killing the cluster's leader neither loses a held lock nor lets a waiter in",
          "[etcd][fault]") {
  const std::string prefix = unique_name("leader") + "/";
  auto holder = make_etcd(cluster(), prefix);
  auto waiter = make_etcd(cluster(), prefix);
  auto held = holder->create_lock("job").acquire(10s);
  auto waiting = waiter->create_lock("job").async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return support::etcd_keys(cluster(), prefix).size() == 2; }));
  const std::string leader = cluster_leader();
  support::undo_test_servers_fault restart({"restart", leader});
  support::test_servers({"kill", leader});
  CHECK_FALSE(lost_within(held, 2 * lease_ttl));
  CHECK(waiting.wait_for(0s) == std::future_status::timeout);
  held.release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  auto next = waiting.get();
  CHECK(next.fencing_token() > held.fencing_token());
  restart.now();
  CHECK_FALSE(lost_within(next, lease_ttl));
}

TEST_CASE("with a majority of the cluster down, a held lock is lost and a waiter fails with "
          "connection_error within the lease's TTL, and the providers work again after recovery",
          "[etcd][fault]") {
  const std::string prefix = unique_name("majority") + "/";
  auto holder = make_etcd(cluster(), prefix);
  auto waiter = make_etcd(cluster(), prefix);
  auto held = holder->create_lock("job").acquire(10s);
  auto waiting = waiter->create_lock("job").async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return support::etcd_keys(cluster(), prefix).size() == 2; }));
  support::undo_test_servers_fault restart2({"restart", "etcd2"});
  support::undo_test_servers_fault restart3({"restart", "etcd3"});
  support::test_servers({"kill", "etcd2"});
  support::test_servers({"kill", "etcd3"});
  const auto cut = std::chrono::steady_clock::now();
  REQUIRE(lost_within(held, loss_bound));
  REQUIRE(waiting.wait_for(loss_bound) == std::future_status::ready);
  CHECK_THROWS_AS(waiting.get(), dlock::connection_error);
  CHECK(std::chrono::steady_clock::now() - cut < 2 * loss_bound);
  restart2.now();
  restart3.now();
  auto again = waiter->create_lock("job").acquire(30s);
  CHECK(again.fencing_token() > held.fencing_token());
}

TEST_CASE("a holder whose member is paused past the TTL sees its lock lost, and after the "
          "resume the provider acquires again", "[etcd][fault]") {
  const std::string prefix = unique_name("pause") + "/";
  auto etcd = make_etcd(standalone(), prefix);
  auto held = etcd->create_lock("job").acquire(10s);
  support::undo_test_servers_fault resume({"resume", "etcd"});
  support::test_servers({"pause", "etcd"});
  REQUIRE(lost_within(held, loss_bound));
  resume.now();
  auto again = etcd->create_lock("job").acquire(30s);
  CHECK(again.fencing_token() > held.fencing_token());
}
