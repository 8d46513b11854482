// The etcd test servers are real etcd: one member, and a cluster of three whose members agree on
// one leader. Looked at with etcdctl, the etcd project's own client.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "etcd_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace {

std::string member() {
  return support::etcd_endpoints(support::require_test_server_endpoint("DLOCK_TEST_ETCD"));
}
std::string cluster() {
  return support::etcd_endpoints(
      support::require_test_server_endpoint("DLOCK_TEST_ETCD_CLUSTER"));
}

/// One line of `etcdctl endpoint status` per member, as "endpoint, id, version, ...".
std::vector<std::string> status_lines(const std::string& endpoints) {
  std::istringstream text(support::etcdctl(endpoints, {"endpoint", "status"}));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace

TEST_CASE("the etcd test server is a real etcd on loopback that keeps a key",
          "[etcd][servers]") {
  CHECK(support::endpoint_hosts(support::require_test_server_endpoint("DLOCK_TEST_ETCD"))
            .at(0)
            .host == "127.0.0.1");
  const std::string key = support::unique_name("servers-etcd-key");
  support::etcdctl(member(), {"put", key, "kept"});
  CHECK(support::etcdctl(member(), {"get", "--print-value-only", key}) == "kept\n");
  support::etcdctl(member(), {"del", key});
  CHECK(support::etcd_keys(member(), key).empty());
}

TEST_CASE("the etcd test cluster has three members that agree on one leader",
          "[etcd][servers]") {
  const auto members = support::etcdctl(cluster(), {"member", "list"});
  CHECK(std::count(members.begin(), members.end(), '\n') == 3);
  const auto lines = status_lines(cluster());
  REQUIRE(lines.size() == 3);
  // "127.0.0.1:port, member id, version, db size, is leader, ...": exactly one says it leads.
  int leaders = 0;
  for (const auto& line : lines) {
    std::vector<std::string> fields;
    std::istringstream row(line);
    for (std::string field; std::getline(row, field, ',');) {
      const auto begins = field.find_first_not_of(' ');
      fields.push_back(begins == std::string::npos ? "" : field.substr(begins));
    }
    REQUIRE(fields.size() > 4);
    if (fields[4] == "true") ++leaders;
  }
  CHECK(leaders == 1);
  const std::string key = support::unique_name("servers-etcd-replicated");
  const auto hosts = support::endpoint_hosts(
      support::require_test_server_endpoint("DLOCK_TEST_ETCD_CLUSTER"));
  support::etcdctl(hosts.at(0).host + ":" + std::to_string(hosts.at(0).port), {"put", key, "1"});
  for (const auto& host : hosts) {
    CHECK(support::etcdctl(host.host + ":" + std::to_string(host.port),
                           {"get", "--consistency=l", "--print-value-only", key}) == "1\n");
  }
  support::etcdctl(cluster(), {"del", key});
}
