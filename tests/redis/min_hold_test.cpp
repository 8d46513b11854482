// A lock's minimum hold on one server, as the server keeps it (docs/redis.md, "Minimum hold"):
// a release within the hold leaves the key to expire at its end, a queued waiter takes the lock
// then (no release message comes), and the watchdog's extensions never cut the key below the
// hold, so a holder that dies still keeps it.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <future>
#include <thread>

#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

using namespace std::chrono_literals;
using redis_test::endpoint;
using redis_test::key_of;
using redis_test::prefix;
using redis_test::redis_cli;
using support::unique_name;
using support::wait_until;

namespace {

using clock_type = std::chrono::steady_clock;

/// `servers` (the single server by default) with `options` ("name=value&...") under this
/// process's prefix.
std::string url_with(const std::string& options, const std::string& servers = endpoint()) {
  return servers + "?prefix=" + prefix() + "&" + options;
}

long pttl(const std::string& key) { return std::stol(redis_cli({"PTTL", key})); }

}  // namespace

TEST_CASE("a release within the minimum hold leaves the key with its token until the hold ends",
          "[redis][min_hold]") {
  auto provider = dlock::make_provider(url_with("expiry=10s"));
  const auto name = unique_name("min-hold-key");
  auto held = provider->create_lock(name).with_min_hold(3s).acquire(10s);
  // The grant lives the longer of expiry and hold, and records the hold beside it.
  const std::string token = redis_cli({"GET", key_of(name)});
  CHECK(redis_cli({"GET", key_of(name) + ":hold"}) == token);
  CHECK(pttl(key_of(name) + ":hold") <= 3000);
  held.release();
  // Still the holder's token, now expiring with the hold (by the server's clock).
  CHECK(redis_cli({"GET", key_of(name)}) == token);
  const long left = pttl(key_of(name));
  CHECK(left > 0);
  CHECK(left <= 3000);  // the hold's rest, no longer the expiry
  CHECK(redis_cli({"HEXISTS", key_of(name) + ":owners", token}) == "0");
  // Expired by the server, not deleted by anyone.
  REQUIRE(wait_until([&] { return redis_cli({"EXISTS", key_of(name)}) == "0"; }, 10s));
}

TEST_CASE("a queued waiter takes a lock released within its hold when the hold ends, not an "
          "extension period later",
          "[redis][min_hold]") {
  // One server, and RedLock's three (each keeps the hold, and queues the waiter, by itself).
  const std::string servers = GENERATE(endpoint(), redis_test::redlock_endpoint());
  CAPTURE(servers);
  // A long expiry: a waiter that learnt nothing of the hold would look again only after
  // extend_every (5 s) or the key's expiry.
  auto holder = dlock::make_provider(url_with("expiry=15s", servers));
  auto waiter = dlock::make_provider(url_with("expiry=15s", servers));
  const auto name = unique_name("min-hold-queued");
  constexpr auto hold = 1500ms;
  const auto asked = clock_type::now();
  auto held = holder->create_lock(name).with_min_hold(hold).acquire(10s);
  const std::uint64_t first = held.fencing_token();
  auto next = std::async(std::launch::async, [&] {
    auto handle = waiter->create_lock(name).acquire(30s);
    return std::pair{clock_type::now(), handle.fencing_token()};
  });
  const int first_server = redis_test::port_of(servers);
  REQUIRE(wait_until(
      [&] { return redis_cli(first_server, {"ZCARD", key_of(name) + ":queue"}) == "1"; }, 10s));
  held.release();
  REQUIRE(next.wait_for(30s) == std::future_status::ready);
  const auto [got_at, token] = next.get();
  CHECK(got_at - asked >= hold - 20ms);
  CHECK(got_at - asked < hold + 2s);
  CHECK(token > first);
}

TEST_CASE("a holder killed within a hold longer than its expiry keeps the lock until the hold "
          "ends, as extensions never shorten the key below it",
          "[redis][min_hold][multiprocess]") {
  auto provider = dlock::make_provider(url_with("expiry=1s"));
  const auto name = unique_name("min-hold-extended");
  const auto asked = clock_type::now();
  support::child_process holder(
      {support::helper_path(), "hold", url_with("expiry=1s&min_hold=4s"), name, "lock"});
  auto line = holder.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("acquired ", 0) == 0);
  // Past one expiry, so the holder's watchdog (every third of it) has extended the key a few
  // times: an extension to the expiry alone would let the key go one expiry after the kill.
  std::this_thread::sleep_until(asked + 1500ms);
  holder.signal(SIGKILL);
  REQUIRE(holder.wait());
  auto next = provider->create_lock(name).acquire(30s);
  CHECK(clock_type::now() - asked >= 4s - 20ms);
  CHECK(next.fencing_token() > std::stoull(line->substr(9)));
}
