// The fault helpers of scripts/test-servers.sh against etcd: restart and pause/resume of the
// single member and of a cluster member, and kill-connections, which etcd does not offer.
#include <catch2/catch.hpp>

#include <sstream>
#include <stdexcept>

#include "etcd_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

std::string endpoints_of(const char* variable) {
  return support::etcd_endpoints(support::require_test_server_endpoint(variable));
}

// The address ("host:port") of the member that leads the cluster, from `etcdctl endpoint
// status` ("endpoint, id, version, db size, is leader, ...", one line per member that answers);
// asked again while an election (after the fault tests before) has no leader yet.
std::string leader_address(const std::string& cluster) {
  std::string leader;
  support::wait_until([&] {
    try {
      std::istringstream lines(support::etcdctl(cluster, {"endpoint", "status"}));
      for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string endpoint, field;
        std::getline(fields, endpoint, ',');
        for (int i = 1; i < 5 && std::getline(fields, field, ','); ++i) {
        }
        if (field == " true") leader = endpoint;
      }
    } catch (const std::runtime_error&) {
      // a member did not answer: ask again
    }
    return !leader.empty();
  }, 15s);
  if (leader.empty()) throw std::runtime_error("no leader in the etcd cluster within 15 s");
  return leader;
}

bool answers(const std::string& endpoints) {
  try {
    support::etcdctl(endpoints, {"get", "--consistency=l", "servers-etcd-health"});
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("after restart, the etcd member answers on the same port and kept its keys",
          "[etcd][servers][fault]") {
  const std::string member = endpoints_of("DLOCK_TEST_ETCD");
  const std::string key = support::unique_name("servers-etcd-kept");
  support::etcdctl(member, {"put", key, "kept"});
  support::undo_test_servers_fault restart({"restart", "etcd"});
  restart.now();
  CHECK(support::wait_until([&] { return answers(member); }, 10s));
  CHECK(support::etcdctl(member, {"get", "--print-value-only", key}) == "kept\n");
  support::etcdctl(member, {"del", key});
}

TEST_CASE("a paused etcd member does not answer, and answers after resume",
          "[etcd][servers][fault]") {
  const std::string member = endpoints_of("DLOCK_TEST_ETCD");
  support::undo_test_servers_fault resume({"resume", "etcd"});
  support::test_servers({"pause", "etcd"});
  const auto tried = std::chrono::steady_clock::now();
  CHECK_FALSE(answers(member));
  CHECK(std::chrono::steady_clock::now() - tried < 10s);
  resume.now();
  CHECK(support::wait_until([&] { return answers(member); }, 10s));
}

TEST_CASE("with one member paused the etcd cluster serves, and the member catches up after",
          "[etcd][servers][fault]") {
  const std::string cluster = endpoints_of("DLOCK_TEST_ETCD_CLUSTER");
  const auto hosts =
      support::endpoint_hosts(support::require_test_server_endpoint("DLOCK_TEST_ETCD_CLUSTER"));
  auto address = [&](std::size_t i) {
    return hosts.at(i).host + ":" + std::to_string(hosts.at(i).port);
  };
  // A follower is paused: a put that a follower forwards to a leader paused meanwhile is
  // dropped, and the member answers only at its request timeout (6 s), after etcdctl's 5 s.
  // Which member leads depends on the fault tests before (a killed leader, a lost quorum).
  const std::string leader = leader_address(cluster);
  std::size_t paused = 0;
  while (address(paused) == leader) ++paused;
  // Written through the two members that answer: a paused member takes a call and never
  // answers it, and etcdctl does not move a call on to another endpoint.
  const std::string answering = address((paused + 1) % 3) + "," + address((paused + 2) % 3);
  const std::string paused_address = address(paused);
  const std::string paused_id = "etcd" + std::to_string(paused + 1);
  const std::string key = support::unique_name("servers-etcd-quorum");
  support::undo_test_servers_fault resume({"resume", paused_id});
  support::test_servers({"pause", paused_id});
  support::etcdctl(answering, {"put", key, "written"});
  resume.now();
  CHECK(support::wait_until(
      [&] {
        try {
          return support::etcdctl(paused_address, {"get", "--consistency=l",
                                                   "--print-value-only", key}) == "written\n";
        } catch (const std::runtime_error&) {
          return false;
        }
      },
      10s));
  support::etcdctl(cluster, {"del", key});
}

TEST_CASE("kill-connections on etcd is refused and names what to use instead",
          "[etcd][servers][fault]") {
  const auto result = support::run_test_servers_script({"kill-connections", "etcd"});
  CHECK(result.exit_code != 0);
  CHECK_THAT(result.output, Catch::Contains("kill-connections is not available for etcd"));
  CHECK_THAT(result.output, Catch::Contains("pause, restart or kill"));
}
