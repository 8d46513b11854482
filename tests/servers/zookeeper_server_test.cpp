// The ZooKeeper test servers are a real standalone server and a real 3-member ensemble.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "support.hpp"
#include "zookeeper_client.hpp"

TEST_CASE("the standalone ZooKeeper creates and deletes a node", "[zookeeper][servers]") {
  const auto url = support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER");
  const auto at = support::endpoint_hosts(url).at(0);
  CHECK(at.host == "127.0.0.1");
  CHECK(support::zookeeper_mode(at.port) == "standalone");
  support::zookeeper_session session(support::zookeeper_hosts(url));
  CHECK(session.create_and_delete("/" + support::unique_name("dlock-servers-test")) == ZOK);
}

TEST_CASE("every ensemble member answers srvr and one of them leads", "[zookeeper][servers]") {
  const auto url = support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER_ENSEMBLE");
  const auto members = support::endpoint_hosts(url);
  REQUIRE(members.size() == 3);
  std::vector<std::string> modes;
  for (const auto& member : members) modes.push_back(support::zookeeper_mode(member.port));
  INFO("modes: " << modes[0] << ", " << modes[1] << ", " << modes[2]);
  CHECK(std::count(modes.begin(), modes.end(), "leader") == 1);
  CHECK(std::count(modes.begin(), modes.end(), "follower") == 2);
  support::zookeeper_session session(support::zookeeper_hosts(url));
  CHECK(session.create_and_delete("/" + support::unique_name("dlock-servers-test")) == ZOK);
}
