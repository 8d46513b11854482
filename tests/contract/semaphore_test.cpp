// The semaphore: at most max_count holders of a name.
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("a semaphore admits max_count holders and no more", "[contract][deployment][semaphore]") {
  const auto name = unique_name("sem");
  auto a = backend().make_provider();
  auto b = backend().make_provider();
  std::vector<dlock::lock_handle> slots;
  for (int i = 0; i < 3; ++i) {
    auto slot = (i % 2 ? a : b)->create_semaphore(name, 3).try_acquire();
    REQUIRE(slot);
    slots.push_back(std::move(*slot));
  }
  CHECK_FALSE(a->create_semaphore(name, 3).try_acquire());
  CHECK_FALSE(b->create_semaphore(name, 3).try_acquire(10ms));
  slots.erase(slots.begin());
  CHECK(b->create_semaphore(name, 3).try_acquire());
}

TEST_CASE("semaphore fencing tokens strictly increase across slots", "[contract][semaphore]") {
  const auto name = unique_name("sem-fencing");
  auto provider = backend().make_provider();
  auto semaphore = provider->create_semaphore(name, 2);
  std::vector<dlock::lock_handle> held;
  std::uint64_t previous = 0;
  for (int i = 0; i < 6; ++i) {
    if (held.size() == 2) held.erase(held.begin());
    held.push_back(semaphore.acquire(5s));
    CHECK(held.back().fencing_token() > previous);
    previous = held.back().fencing_token();
  }
}

TEST_CASE("a release wakes a semaphore waiter", "[contract][deployment][semaphore]") {
  const auto name = unique_name("sem-wake");
  auto a = backend().make_provider();
  auto b = backend().make_provider();
  auto only = a->create_semaphore(name, 1).acquire();
  auto waiting = b->create_semaphore(name, 1).async_acquire(30s, {}, boost::asio::use_future);
  only.release();
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);
  CHECK(waiting.get());
}

TEST_CASE("a semaphore used with another max_count than its holders' is invalid_argument "
          "naming both counts",
          "[contract][semaphore]") {
  auto holders = backend().make_provider();
  auto other = backend().make_provider();
  const auto name = unique_name("max-count");
  auto slot = holders->create_semaphore(name, 3).acquire(10s);
  const auto before = backend().server_footprint(name);

  auto wrong = other->create_semaphore(name, 4);
  REQUIRE_THROWS_AS(wrong.try_acquire(), std::invalid_argument);
  // Refused at once, not after waiting for a slot of the wrong count.
  REQUIRE_THROWS_AS(wrong.acquire(10s), std::invalid_argument);
  // The file and ZooKeeper backends add " (recorded in <where>)".
  REQUIRE_THROWS_WITH(wrong.try_acquire(),
                      Catch::StartsWith("dlock: " + std::string(other->scheme()) + " " +
                                        other->endpoint() + ": semaphore '" + name +
                                        "' is used with max_count 4 here but 3 by its holders"));
  // The refused attempts left nothing behind, and the holders' count still admits two more.
  if (before) CHECK(wait_until([&] { return backend().server_footprint(name) == before; }));
  auto second = other->create_semaphore(name, 3).try_acquire();
  auto third = other->create_semaphore(name, 3).try_acquire();
  CHECK(second);
  CHECK(third);
  CHECK_FALSE(other->create_semaphore(name, 3).try_acquire());
}
