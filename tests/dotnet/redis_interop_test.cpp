// dlock in .NET DistributedLock's Redis layout (layout=dotnet) and the real library
// (DistributedLock.Redis from NuGet) on the same servers: one server, and RedLock over three.
// Locks, reader-writer locks (a waiting writer of either side holds back the other's readers)
// and semaphores exclude each other both ways, and each side is granted once the other
// releases; .NET publishes nothing on release, so dlock's waiters poll (within 1 s).
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "dotnet_side.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using dotnet_interop::dotnet_side;
using dotnet_interop::granted_after;

namespace {

struct deployment {
  std::string label;
  std::string url;      ///< dlock's, in .NET's layout with no prefix
  std::string servers;  ///< the .NET program's: host:port[,host:port...]
};

deployment deployment_of(const std::string& label, const char* variable) {
  const std::string endpoint = support::require_test_server_endpoint(variable);
  std::string servers;
  for (const auto& host : support::endpoint_hosts(endpoint)) {
    servers += (servers.empty() ? "" : ",") + host.host + ":" + std::to_string(host.port);
  }
  return {label, endpoint + "?layout=dotnet&prefix=", servers};
}

std::vector<deployment> deployments() {
  return {deployment_of("one server", "DLOCK_TEST_REDIS"),
          deployment_of("RedLock", "DLOCK_TEST_REDLOCK")};
}

// Runs `body` with a .NET side and a dlock provider on each deployment, one section each.
template <class Body>
void on_each_deployment(Body body) {
  for (const auto& where : deployments()) {
    DYNAMIC_SECTION(where.label) {
      dotnet_side dotnet("redis", where.servers);
      auto redis = dlock::make_provider(where.url);
      body(dotnet, *redis);
    }
  }
}

}  // namespace

TEST_CASE(".NET's Redis lock excludes dlock's, and dlock is granted once .NET releases",
          "[dotnet][redis]") {
  on_each_deployment([](dotnet_side& dotnet, dlock::provider& redis) {
    const auto name = support::unique_name("dotnet-lock");
    REQUIRE(dotnet.ask("hold lock " + name) == "held");
    CHECK_FALSE(redis.create_lock(name).try_acquire());
    auto held = granted_after(
        redis,
        [&] { return redis.create_lock(name).async_acquire(60s, {}, boost::asio::use_future); },
        [&] { REQUIRE(dotnet.ask("release lock " + name) == "released"); });
    CHECK(dotnet.ask("try lock " + name) == "taken");
  });
}

TEST_CASE("dlock's Redis lock excludes .NET's, and .NET is granted once dlock releases",
          "[dotnet][redis]") {
  on_each_deployment([](dotnet_side& dotnet, dlock::provider& redis) {
    const auto name = support::unique_name("dotnet-lock");
    auto held = redis.create_lock(name).acquire(10s);
    const auto first_token = held.fencing_token();
    CHECK(dotnet.ask("try lock " + name) == "taken");
    dotnet.send("wait lock " + name + " 60000");
    CHECK_FALSE(dotnet.answer(200ms));  // its answer comes only with the grant
    held.release();
    const auto granted = dotnet.answer(60s);
    REQUIRE(granted);
    REQUIRE(granted->rfind("held ", 0) == 0);
    CHECK_FALSE(redis.create_lock(name).try_acquire());
    REQUIRE(dotnet.ask("release lock " + name) == "released");
    auto again = redis.create_lock(name).try_acquire();
    REQUIRE(again);
    CHECK(again->fencing_token() > first_token);  // dlock's own counter, beside .NET's key
  });
}

TEST_CASE("Redis reader-writer locks: readers share, writers exclude, and a waiting writer of "
          "either side holds back the other's readers",
          "[dotnet][redis]") {
  on_each_deployment([](dotnet_side& dotnet, dlock::provider& redis) {
    const auto name = support::unique_name("dotnet-rw");
    auto rw = redis.create_reader_writer_lock(name);

    REQUIRE(dotnet.ask("hold read " + name) == "held");
    auto read = rw.try_acquire_read();
    CHECK(read);
    CHECK_FALSE(rw.try_acquire_write());
    // dlock's waiting writer leaves .NET's waiting mark, which new .NET readers respect.
    auto write = granted_after(
        redis, [&] { return rw.async_acquire_write(60s, {}, boost::asio::use_future); },
        [&] {
          CHECK(dotnet.ask("try read " + name) == "taken");
          read.reset();
          REQUIRE(dotnet.ask("release read " + name) == "released");
        });
    CHECK(dotnet.ask("try read " + name) == "taken");
    CHECK(dotnet.ask("try write " + name) == "taken");
    write.release();

    // .NET's waiting writer holds back dlock's new readers, and is granted once they leave.
    auto dlock_read = rw.acquire_read(10s);
    dotnet.send("wait write " + name + " 60000");
    REQUIRE(support::wait_until([&] { return !rw.try_acquire_read(); }));
    CHECK_FALSE(dotnet.answer(100ms));
    dlock_read.release();
    const auto granted = dotnet.answer(60s);
    REQUIRE(granted);
    REQUIRE(granted->rfind("held ", 0) == 0);
    CHECK_FALSE(rw.try_acquire_read());
    CHECK_FALSE(rw.try_acquire_write());
    REQUIRE(dotnet.ask("release write " + name) == "released");
    CHECK(rw.try_acquire_write());
  });
}

TEST_CASE("Redis semaphores count .NET's and dlock's holders together", "[dotnet][redis]") {
  on_each_deployment([](dotnet_side& dotnet, dlock::provider& redis) {
    const auto name = support::unique_name("dotnet-sem");
    auto semaphore = redis.create_semaphore(name, 2);
    REQUIRE(dotnet.ask("hold sem:2 " + name) == "held");
    auto slot = semaphore.acquire(10s);
    CHECK(dotnet.ask("try sem:2 " + name) == "taken");
    CHECK_FALSE(semaphore.try_acquire());
    auto second = granted_after(
        redis, [&] { return semaphore.async_acquire(60s, {}, boost::asio::use_future); },
        [&] { REQUIRE(dotnet.ask("release sem:2 " + name) == "released"); });
    CHECK(dotnet.ask("try sem:2 " + name) == "taken");
    slot.release();
    CHECK(dotnet.ask("try sem:2 " + name) == "held");
  });
}
