// dlock::etcd under faults: a member restarted, the cluster's leader killed, a majority of the
// cluster down or paused (no quorum), a paused member. These kill, pause and restart servers
// that other tests share, so they run alone (RUN_SERIAL) and leave the servers healthy.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <dlock/dlock.hpp>

#include "etcd_client.hpp"
#include "etcd_metrics.hpp"
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

// How many watchers the standalone server keeps, from its /metrics (the gauge
// etcd_debugging_mvcc_watcher_total); -1 when it cannot be read.
int server_watchers() {
  const auto port = support::endpoint_hosts(
      support::require_test_server_endpoint("DLOCK_TEST_ETCD")).at(0).port;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  constexpr std::string_view request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[65536];
    for (ssize_t got; (got = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, got);
  }
  ::close(fd);
  constexpr std::string_view gauge = "\netcd_debugging_mvcc_watcher_total ";
  const auto at = answer.find(gauge);
  if (at == std::string::npos) return -1;
  return std::atoi(answer.c_str() + at + gauge.size());
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

TEST_CASE("an acquire whose calls time out while the cluster has no quorum is tried again "
          "until the quorum is back, and granted then, within the lease", "[etcd][fault]") {
  const std::string prefix = unique_name("no-quorum") + "/";
  // One member's endpoint, so that every call meets the member left alone; a TTL that outlasts
  // its requests' 6 s timeout (5 s and two 500 ms elections) with room to spare.
  const std::string first_member = cluster().substr(0, cluster().find(','));
  auto etcd = std::make_shared<dlock::etcd::provider>(dlock::etcd::options{
      .endpoints = first_member, .prefix = prefix, .lease_ttl = 30s});
  // The provider's lease is granted by now; the release is confirmed before the outage.
  etcd->create_lock("job").acquire(10s).release();
  support::undo_test_servers_fault resume2({"resume", "etcd2"});
  support::undo_test_servers_fault resume3({"resume", "etcd3"});
  // The member counts the transactions it was sent (the acquire's first call is one).
  const auto transactions = [&] {
    return support::etcd_metric(first_member, "grpc_server_started_total{grpc_method=\"Txn\",");
  };
  const double before = transactions();
  support::test_servers({"pause", "etcd2"});
  support::test_servers({"pause", "etcd3"});
  const auto started = std::chrono::steady_clock::now();
  auto waiting = etcd->create_lock("job").async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return transactions() > before; }));
  const double first_try = transactions();
  // Past the member's request timeout: its first answer, "request timed out", has come and the
  // acquire has tried again, 200 ms later.
  CHECK(waiting.wait_until(started + 8s) == std::future_status::timeout);
  CHECK(transactions() > first_try);
  resume2.now();
  resume3.now();
  REQUIRE(waiting.wait_for(20s) == std::future_status::ready);
  auto granted = waiting.get();
  CHECK_FALSE(granted.lost());
  CHECK(support::etcd_keys(cluster(), prefix).size() == 1);
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

TEST_CASE("an election observer's watch is made again after its member restarts, and the "
          "observation goes on",
          "[etcd][fault][election]") {
  const std::string prefix = unique_name("observed-restart") + "/";
  auto observer = make_etcd(standalone(), prefix);
  std::mutex mutex;
  std::optional<dlock::leader_info> last;
  auto observation = observer->create_election("chair").observe(
      [&](const std::optional<dlock::leader_info>& leader) {
        std::lock_guard lock(mutex);
        last = leader;
      });
  REQUIRE(wait_until([] { return server_watchers() >= 1; }, 10s));
  support::test_servers({"restart", "etcd"});
  // A restarted server starts with no watcher: the one it counts is the observer's, back.
  CHECK(wait_until([] { return server_watchers() >= 1; }, 15s));
  auto campaigner = make_etcd(standalone(), prefix);
  auto lead = campaigner->create_election("chair").campaign("after the restart", 10s);
  const dlock::leader_info expected{"after the restart", lead.term()};
  CHECK(wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return last == expected;
      },
      10s));
}
