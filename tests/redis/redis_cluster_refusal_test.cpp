// What a redis+cluster:// provider refuses, with the error that names why: options a cluster
// cannot have, seeds that cannot be reached, and a server that is no cluster node (the plain
// test server).
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

using namespace std::chrono_literals;

TEST_CASE("a cluster URL with a database, plain keys or a Unix socket is invalid_argument",
          "[redis][cluster][errors]") {
  REQUIRE_THROWS_WITH(dlock::make_provider("redis+cluster://127.0.0.1:7000/2"),
                      Catch::Contains("only database 0"));
  REQUIRE_THROWS_WITH(dlock::make_provider("redis+cluster://127.0.0.1:7000?plain_keys=true"),
                      Catch::Contains("plain_keys"));
  REQUIRE_THROWS_AS(dlock::redis::provider({.servers = {{.host = {}, .unix_socket = "/tmp/s"}},
                                            .cluster = true}),
                    std::invalid_argument);
}

TEST_CASE("cluster seeds that cannot be reached are a connection_error naming each",
          "[redis][cluster][errors]") {
  auto locks = dlock::make_provider("redis+cluster://127.0.0.1:1,127.0.0.1:2");
  REQUIRE_THROWS_WITH(locks->create_lock("x").acquire(1s),
                      Catch::Contains("slot map") && Catch::Contains("127.0.0.1:1") &&
                          Catch::Contains("127.0.0.1:2"));
  REQUIRE_THROWS_AS(locks->create_lock("x").try_acquire(), dlock::connection_error);
}

TEST_CASE("a cluster URL naming a server that is no cluster node is a connection_error saying so",
          "[redis][cluster][errors]") {
  const auto at = support::endpoint_hosts(redis_test::endpoint()).at(0);
  auto locks = dlock::make_provider("redis+cluster://" + at.host + ":" + std::to_string(at.port));
  REQUIRE_THROWS_AS(locks->create_lock("x").try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(locks->create_lock("x").acquire(1s), Catch::Contains("not a cluster node"));
}
