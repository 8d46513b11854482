// The fault helpers of scripts/test-servers.sh against ZooKeeper: pause/resume and restart of an
// ensemble member while the ensemble keeps serving, restart of the standalone server.
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>

#include "support.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;

namespace {

std::string ensemble_url() {
  return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER_ENSEMBLE");
}

bool ensemble_serves() {
  try {
    support::zookeeper_session session(support::zookeeper_hosts(ensemble_url()), 15s);
    return session.create_and_delete("/" + support::unique_name("dlock-servers-test")) == ZOK;
  } catch (const std::runtime_error&) {
    return false;
  }
}

bool in_quorum(int port) {
  const auto mode = support::zookeeper_mode(port, 500ms);
  return mode == "leader" || mode == "follower";
}

}  // namespace

TEST_CASE(
    "a paused ensemble member does not answer while the others serve, and rejoins after resume",
    "[zookeeper][servers][fault]") {
  const int zk1 = support::endpoint_hosts(ensemble_url()).at(0).port;
  REQUIRE(in_quorum(zk1));
  support::undo_test_servers_fault resume({"resume", "zk1"});
  support::test_servers({"pause", "zk1"});

  CHECK_FALSE(support::zookeeper_four_letter_word(zk1, "srvr", 200ms));
  CHECK(support::wait_until(ensemble_serves, 60s));

  resume.now();
  CHECK(support::wait_until([&] { return in_quorum(zk1); }, 60s));
}

TEST_CASE("a restarted ensemble member rejoins on the same port", "[zookeeper][servers][fault]") {
  const int zk2 = support::endpoint_hosts(ensemble_url()).at(1).port;
  support::undo_test_servers_fault restart({"restart", "zk2"});
  restart.now();
  CHECK(in_quorum(zk2));
  CHECK(support::wait_until(ensemble_serves, 60s));
}

TEST_CASE("after restart, the standalone ZooKeeper serves a new session",
          "[zookeeper][servers][fault]") {
  const auto url = support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER");
  support::undo_test_servers_fault restart({"restart", "zookeeper"});
  restart.now();
  CHECK(support::zookeeper_mode(support::endpoint_hosts(url).at(0).port) == "standalone");
  support::zookeeper_session session(support::zookeeper_hosts(url));
  CHECK(session.create_and_delete("/" + support::unique_name("dlock-servers-test")) == ZOK);
}

TEST_CASE("with one member shut down the ensemble serves, and restart brings the member back",
          "[zookeeper][servers][fault]") {
  const int zk3 = support::endpoint_hosts(ensemble_url()).at(2).port;
  support::undo_test_servers_fault restart({"restart", "zk3"});
  support::test_servers({"shutdown", "zk3"});
  CHECK_FALSE(support::zookeeper_four_letter_word(zk3, "srvr", 200ms));
  CHECK(support::wait_until(ensemble_serves, 60s));
  restart.now();
  CHECK(in_quorum(zk3));
}
