// The semaphore: at most max_count holders of a name.
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;

TEST_CASE("a semaphore admits max_count holders and no more", "[contract][semaphore]") {
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

TEST_CASE("a release wakes a semaphore waiter", "[contract][semaphore]") {
  const auto name = unique_name("sem-wake");
  auto a = backend().make_provider();
  auto b = backend().make_provider();
  auto only = a->create_semaphore(name, 1).acquire();
  auto waiting = b->create_semaphore(name, 1).async_acquire(30s, {}, boost::asio::use_future);
  only.release();
  REQUIRE(waiting.wait_for(30s) == std::future_status::ready);
  CHECK(waiting.get());
}
