// Elections in plain-key mode: an election has no counterpart among other clients' SET NX PX
// locks, so its keys are the tagged ones in either mode (docs/redis.md, "Plain-key mode").
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

using namespace std::chrono_literals;

TEST_CASE("with plain keys an election keeps its tagged keys: one election with a provider "
          "without them, apart from the plain lock of the name", "[redis][plain][election]") {
  const std::string options = "?prefix=" + redis_test::prefix();
  auto plain = dlock::make_provider(redis_test::endpoint() + options + "&plain_keys=true");
  auto tagged = dlock::make_provider(redis_test::endpoint() + options);
  const std::string name = support::unique_name("plain-election");

  // Another client's SET NX PX lock of the name blocks no candidate.
  const std::string plain_key = redis_test::prefix() + name;
  REQUIRE(redis_test::redis_cli({"SET", plain_key, "held-by-redis-cli", "NX", "PX", "30000"}) ==
          "OK");
  dlock::leadership lead = plain->create_election(name).campaign("plain", 5s);
  lead.proclaim("plain leader");
  CHECK(redis_test::redis_cli({"HGET", redis_test::key_of(name) + ":leader", "value"}) ==
        "plain leader");
  CHECK(tagged->create_election(name).leader() == dlock::leader_info{"plain leader", lead.term()});
  CHECK_FALSE(tagged->create_election(name).try_campaign("tagged"));
  const std::uint64_t term = lead.term();
  lead.resign();
  dlock::leadership next = tagged->create_election(name).campaign("tagged", 5s);
  CHECK(next.term() > term);
  redis_test::redis_cli({"DEL", plain_key});
}
