// dlock::fence: the in-process resource side of fencing.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <dlock/core/fence.hpp>
#include <dlock/memory.hpp>

#include "support.hpp"

using namespace std::chrono_literals;

TEST_CASE("a fence runs writes with the highest token or a newer one, and refuses older ones",
          "[core][fence]") {
  dlock::fence fence;
  int value = 0;
  CHECK(fence.write(5, [&] { return value = 1; }) == 1);
  CHECK(fence.write(5, [&] { return value = 2; }) == 2);  // the same holder, again
  CHECK(fence.write(9, [&] { return value = 3; }) == 3);
  CHECK_THROWS_AS(fence.write(5, [&] { return value = 4; }), dlock::lock_lost_error);
  CHECK_THROWS_WITH(fence.write(8, [&] { return value = 5; }),
                    Catch::Contains("8") && Catch::Contains("older than 9"));
  CHECK(value == 3);
  CHECK(fence.highest() == 9);
  CHECK(fence.admits(9));
  CHECK_FALSE(fence.admits(8));
}

TEST_CASE("a fence raises its mark even when the newer write throws", "[core][fence]") {
  dlock::fence fence(3);
  CHECK_THROWS_AS(fence.write(4, []() -> int { throw std::runtime_error("disk full"); }),
                  std::runtime_error);
  CHECK(fence.highest() == 4);
  CHECK_THROWS_AS(fence.write(3, [] {}), dlock::lock_lost_error);
}

TEST_CASE("a fence lets no older write land after a newer one, whatever the interleaving",
          "[core][fence]") {
  dlock::fence fence;
  std::mutex written_mutex;
  std::vector<std::uint64_t> written;
  std::atomic<int> refused{0};
  std::vector<std::thread> writers;
  for (std::uint64_t token = 1; token <= 8; ++token) {
    writers.emplace_back([&, token] {
      for (int i = 0; i < 500; ++i) {
        try {
          fence.write(token, [&] {
            std::lock_guard guard(written_mutex);
            written.push_back(token);
          });
        } catch (const dlock::lock_lost_error&) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (auto& writer : writers) writer.join();
  REQUIRE_FALSE(written.empty());
  for (std::size_t i = 1; i < written.size(); ++i) {
    INFO("write " << i);
    REQUIRE(written[i - 1] <= written[i]);
  }
  CHECK(written.back() == 8);
  CHECK(written.size() + static_cast<std::size_t>(refused.load()) == 8 * 500);
}

TEST_CASE("a fence refuses a handle that is released or lost, and admits a held one",
          "[core][fence]") {
  auto provider = std::make_shared<dlock::memory::provider>();
  auto lock = provider->create_lock("fenced");
  dlock::fence fence;

  dlock::lock_handle held = lock.acquire();
  CHECK(fence.write(held, [] { return true; }));
  held.release();
  CHECK_THROWS_AS(fence.write(held, [] {}), dlock::lock_lost_error);

  dlock::lock_handle limited = lock.with_max_hold(10ms).acquire();
  REQUIRE(support::wait_until([&] { return limited.lost(); }));
  CHECK_THROWS_WITH(fence.write(limited, [] {}),
                    Catch::Contains("'fenced'") && Catch::Contains("no longer held"));

  dlock::lock_handle next = lock.acquire();
  CHECK(next.fencing_token() > fence.highest());
  CHECK_NOTHROW(fence.write(next, [] {}));
}
