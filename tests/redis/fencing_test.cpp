// docs/fencing.md's Redis recipe: dlock::redis::fenced_set_script refuses a paused holder's
// stale write after a newer holder wrote.
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>
#include <dlock/redis/fencing.hpp>

#include "../servers/redis_client.hpp"
#include "paused_holder.hpp"
#include "redis_test_support.hpp"

using namespace std::chrono_literals;
using redis_test::endpoint;
using redis_test::prefix;

namespace {

std::optional<std::string> fenced_set(support::redis_connection& redis, const std::string& key,
                                      std::uint64_t token, const std::string& value) {
  return redis.command({"EVAL", std::string(dlock::redis::fenced_set_script), "2", key,
                        key + ":fence", std::to_string(token), value});
}

}  // namespace

TEST_CASE("the fenced-set script writes for the highest token or a newer one, and no older",
          "[redis][fencing]") {
  support::redis_connection redis(support::endpoint_hosts(endpoint()).at(0));
  const std::string key = prefix() + "{" + support::unique_name("fenced") + "}";
  CHECK(fenced_set(redis, key, 9, "a") == "1");
  CHECK(fenced_set(redis, key, 9, "b") == "1");
  CHECK(fenced_set(redis, key, 10, "c") == "1");
  CHECK(fenced_set(redis, key, 9, "d") == "0");
  // Compared as decimal strings: "9" sorts after "10" as text, but is older.
  CHECK(fenced_set(redis, key, 18446744073709551615ull, "e") == "1");
  CHECK(fenced_set(redis, key, 18446744073709551614ull, "f") == "0");
  CHECK(redis.command({"GET", key}) == "e");
  CHECK(redis.command({"GET", key + ":fence"}) == "18446744073709551615");
}

TEST_CASE("a holder paused past its expiry has its stale write refused by the fenced-set script",
          "[redis][fencing][multiprocess]") {
  const std::string url = endpoint() + "?expiry=1s&prefix=" + prefix();
  const std::string name = support::unique_name("paused-writer");
  const std::string key = prefix() + "{" + name + "}:value";
  support::redis_connection redis(support::endpoint_hosts(endpoint()).at(0));
  auto successor = dlock::make_provider(url);

  support::run_paused_holder(url, name, *successor, 10s, {
    .newer_writes = [&](const dlock::lock_handle& newer) {
      CHECK(fenced_set(redis, key, newer.fencing_token(), "newer") == "1");
    },
    .stale_writes = [&](std::uint64_t stale_token) {
      CHECK(fenced_set(redis, key, stale_token, "stale") == "0");
    },
  });
  CHECK(redis.command({"GET", key}) == "newer");
}
