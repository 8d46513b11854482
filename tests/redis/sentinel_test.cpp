// dlock::redis through Redis Sentinel, against the redis-sentinel group (a master, two replicas,
// three sentinels; nothing fails it over): what the URL takes and refuses, the errors of a
// master name no sentinel knows and of sentinels that are down, and wait_replicas (WAIT). The
// contract suite runs over this group too (contract/backends/redis_sentinel.cpp); failovers are
// in sentinel_failover_test.cpp.
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "../servers/redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::require_test_server_endpoint;

namespace {

/// The group's sentinel URL with `options` (and a key prefix of the test's own).
std::string sentinel_url(const std::string& options = "") {
  return require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL") + "?prefix=" +
         support::unique_name("sentinel") + ":" + (options.empty() ? "" : "&" + options);
}

/// "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3", the sentinels.
std::string sentinel_hosts() {
  const std::string url = require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL");
  const auto start = url.find("://") + 3;
  return url.substr(start, url.find('/', start) - start);
}

support::host_port master() {
  const auto nodes =
      support::endpoint_hosts(require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL_NODES"));
  return nodes.at(0);
}

}  // namespace

TEST_CASE("a redis+sentinel URL without a master name or sentinels is invalid_argument",
          "[redis][sentinel]") {
  CHECK_THROWS_AS(dlock::make_provider("redis+sentinel://127.0.0.1:26379"), std::invalid_argument);
  CHECK_THROWS_WITH(dlock::make_provider("redis+sentinel://127.0.0.1:26379/"),
                    Catch::Contains("must name the sentinels and the master"));
  CHECK_THROWS_AS(dlock::make_provider("redis+sentinel:///mymaster"), std::invalid_argument);
  CHECK_THROWS_WITH(dlock::make_provider("redis+sentinel://h/m?wait_replicas=-1"),
                    Catch::Contains("wait_replicas"));
  CHECK_THROWS_WITH(
      dlock::make_provider("redis+sentinel://h/m?command_timeout=100ms&wait_timeout=100ms"),
      Catch::Contains("wait_timeout"));
  CHECK_THROWS_WITH(dlock::make_provider("redis://h:6379?wait_replicas=1"),
                    Catch::Contains("wait_replicas"));
  CHECK_THROWS_AS(dlock::redis::provider({.servers = {{"h", 6379}},
                                          .sentinel = {.master_name = "m",
                                                       .sentinels = {{"s", 26379}}}}),
                  std::invalid_argument);
}

TEST_CASE("a master name that no sentinel monitors is a connection_error naming each sentinel's "
          "answer",
          "[redis][sentinel]") {
  auto locks = dlock::make_provider("redis+sentinel://" + sentinel_hosts() + "/nosuchmaster");
  REQUIRE_THROWS_AS((void)locks->create_lock("x").try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH((void)locks->create_lock("x").try_acquire(),
                      Catch::Contains("no master by this name is monitored") &&
                          Catch::Contains(sentinel_hosts().substr(0, sentinel_hosts().find(','))));
}

TEST_CASE("unreachable sentinels are a connection_error naming every one of them",
          "[redis][sentinel]") {
  auto locks = dlock::make_provider("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster");
  REQUIRE_THROWS_WITH((void)locks->create_lock("x").try_acquire(),
                      Catch::Contains("127.0.0.1:1: cannot connect") &&
                          Catch::Contains("127.0.0.1:2: cannot connect"));
}

TEST_CASE("a dead first sentinel is skipped: the next one names the master",
          "[redis][sentinel]") {
  auto locks =
      dlock::make_provider("redis+sentinel://127.0.0.1:1," + sentinel_hosts() + "/mymaster");
  CHECK(locks->create_lock("x").try_acquire());
}

TEST_CASE("with wait_replicas a grant returns once the replicas have it", "[redis][sentinel]") {
  const std::string url = sentinel_url("wait_replicas=2");
  auto locks = dlock::make_provider(url);
  dlock::lock_handle held = locks->create_lock("job").acquire(5s);
  const std::string key =
      dlock::redis::provider({.servers = {{"127.0.0.1", 1}},
                              .key_prefix = url.substr(url.find("prefix=") + 7,
                                                       url.find('&') - url.find("prefix=") - 7)})
          .lock_key("job");
  // WAIT returned: both replicas have the grant now, not some time later.
  for (const auto& replica :
       support::endpoint_hosts(require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL_NODES"))) {
    support::redis_connection redis(replica);
    CHECK(redis.command({"EXISTS", key}) == "1");
  }
}

TEST_CASE("with more wait_replicas than acknowledge in wait_timeout the acquire is a "
          "connection_error and the grant is given back",
          "[redis][sentinel]") {
  const std::string url = sentinel_url("wait_replicas=3&wait_timeout=100ms");
  auto locks = dlock::make_provider(url);
  REQUIRE_THROWS_WITH((void)locks->create_lock("job").try_acquire(),
                      Catch::Contains("2 of 3 replicas (wait_replicas) acknowledged it within "
                                      "100 ms (wait_timeout)"));
  support::redis_connection redis(master());
  const std::string prefix = url.substr(url.find("prefix=") + 7);
  CHECK(support::wait_until([&] {
    return redis.command({"EXISTS", prefix.substr(0, prefix.find('&')) + "{job}"}) == "0";
  }));
}

TEST_CASE("layout=dotnet through Sentinel writes .NET's keys on the master", "[redis][sentinel]") {
  const std::string prefix = support::unique_name("sentinel-dotnet") + ":";
  auto locks = dlock::make_provider(require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL") +
                                    "?layout=dotnet&prefix=" + prefix);
  support::redis_connection redis(master());
  auto held = locks->create_lock("job").acquire(5s);
  CHECK(redis.command({"TYPE", prefix + "job"}) == "string");
  CHECK_FALSE(locks->create_lock("job").try_acquire());
  auto rw = locks->create_reader_writer_lock("prices");
  auto read = rw.acquire_read(5s);
  CHECK(redis.command({"TYPE", prefix + "prices.readers"}) == "set");
  CHECK_FALSE(rw.try_acquire_write());
  auto slot = locks->create_semaphore("exports", 1).acquire(5s);
  CHECK(redis.command({"TYPE", prefix + "exports"}) == "zset");
  CHECK_FALSE(locks->create_semaphore("exports", 1).try_acquire());
}
