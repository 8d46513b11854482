// Acquire semantics (docs/semantics.md), stated once for every backend.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("try_acquire on a free lock returns a held handle with a fencing token",
          "[contract][deployment][acquire]") {
  auto provider = backend().make_provider();
  auto held = provider->create_lock(unique_name("free")).try_acquire();
  REQUIRE(held);
  CHECK(held->held());
  CHECK_FALSE(held->lost());
  CHECK(held->fencing_token() > 0);
}

TEST_CASE("try_acquire with zero timeout makes one attempt and returns empty when held",
          "[contract][deployment][acquire]") {
  const auto name = unique_name("zero");
  auto holder = backend().make_provider();
  auto other = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  CHECK_FALSE(other->create_lock(name).try_acquire(0s));
  held.release();
  CHECK(other->create_lock(name).try_acquire(0s));
}

TEST_CASE("acquire throws timeout_error naming the lock and the endpoint",
          "[contract][deployment][acquire]") {
  const auto name = unique_name("timeout");
  auto holder = backend().make_provider();
  auto other = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  REQUIRE_THROWS_AS(other->create_lock(name).acquire(20ms), dlock::timeout_error);
  REQUIRE_THROWS_WITH(other->create_lock(name).acquire(20ms),
                      Catch::Contains(name) && Catch::Contains(other->endpoint()) &&
                          Catch::Contains("timed out after 20ms"));
  REQUIRE_THROWS_WITH(other->create_lock(name).acquire(0s), Catch::Contains("held elsewhere"));
}

TEST_CASE("a negative timeout is invalid_argument", "[contract][acquire]") {
  auto lock = backend().make_provider()->create_lock(unique_name("negative"));
  REQUIRE_THROWS_AS((void)lock.try_acquire(-1ms), std::invalid_argument);
  REQUIRE_THROWS_AS((void)lock.acquire(-1ms), std::invalid_argument);
  REQUIRE_THROWS_WITH((void)lock.acquire(-1ms), Catch::Contains("negative timeout"));
}

TEST_CASE("a stop request ends a wait and acquire throws cancelled_error",
          "[contract][deployment][acquire][cancel]") {
  const auto name = unique_name("stop");
  auto holder = backend().make_provider();
  auto waiter = backend().make_provider();
  auto held = holder->create_lock(name).acquire();

  std::stop_source stop;
  std::atomic<bool> finished{false};
  std::atomic<bool> cancelled{false};
  std::thread waiting([&] {
    try {
      (void)waiter->create_lock(name).acquire(dlock::forever, stop.get_token());
    } catch (const dlock::cancelled_error&) {
      cancelled = true;
    } catch (...) {
    }
    finished = true;
  });
  stop.request_stop();
  REQUIRE(wait_until([&] { return finished.load(); }));
  waiting.join();
  CHECK(cancelled);

  // Nothing was left behind: once the holder releases, a one-shot try by the same
  // provider succeeds.
  held.release();
  CHECK(waiter->create_lock(name).try_acquire());
}

TEST_CASE("try_acquire with an already stopped token returns empty without waiting",
          "[contract][acquire][cancel]") {
  const auto name = unique_name("prestopped");
  auto holder = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  std::stop_source stop;
  stop.request_stop();
  CHECK_FALSE(backend().make_provider()->create_lock(name).try_acquire(1h, stop.get_token()));
}

TEST_CASE("a release wakes a waiter of another provider", "[contract][deployment][acquire]") {
  const auto name = unique_name("handoff");
  auto holder = backend().make_provider();
  auto waiter = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  std::atomic<bool> acquired{false};
  std::thread waiting([&] {
    auto handle = waiter->create_lock(name).acquire(30s);
    acquired = true;
  });
  held.release();
  REQUIRE(wait_until([&] { return acquired.load(); }));
  waiting.join();
}

TEST_CASE("locks are not reentrant: a second acquire on the same provider waits",
          "[contract][acquire]") {
  auto provider = backend().make_provider();
  auto lock = provider->create_lock(unique_name("reentrant"));
  auto held = lock.acquire();
  CHECK_FALSE(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire(30ms));
  held.release();
  CHECK(lock.try_acquire());
}

TEST_CASE("contenders on one provider are served first come, first served",
          "[contract][acquire][fairness]") {
  const auto name = unique_name("fifo");
  auto holder = backend().make_provider();
  auto provider = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  auto lock = provider->create_lock(name);

  std::mutex mutex;
  std::vector<int> order;
  std::atomic<int> done{0};
  constexpr int contenders = 5;
  for (int i = 0; i < contenders; ++i) {
    lock.async_acquire(30s, {}, [&, i](std::exception_ptr error, dlock::lock_handle handle) {
      std::lock_guard guard(mutex);
      order.push_back(error ? -1 : i);
      handle.release();
      ++done;
    });
  }
  held.release();
  REQUIRE(wait_until([&] { return done.load() == contenders; }, 30s));
  std::lock_guard guard(mutex);
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("fencing tokens strictly increase across grants and providers",
          "[contract][deployment][fencing]") {
  const auto name = unique_name("fencing");
  std::vector<std::shared_ptr<dlock::provider>> providers{backend().make_provider(),
                                                          backend().make_provider()};
  std::uint64_t previous = 0;
  for (int i = 0; i < 20; ++i) {
    auto handle = providers[i % 2]->create_lock(name).acquire(10s);
    INFO("grant " << i);
    CHECK(handle.fencing_token() > previous);
    previous = handle.fencing_token();
  }
}

TEST_CASE("threads of several providers never hold one lock together",
          "[contract][deployment][exclusion]") {
  const auto name = unique_name("exclusion");
  constexpr int providers = 3;
  constexpr int threads_per_provider = 2;
  constexpr int iterations = 40;
  std::vector<std::shared_ptr<dlock::provider>> clients;
  for (int i = 0; i < providers; ++i) clients.push_back(backend().make_provider());

  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::mutex tokens_mutex;
  std::vector<std::uint64_t> tokens;
  std::vector<std::thread> threads;
  for (int p = 0; p < providers; ++p) {
    for (int t = 0; t < threads_per_provider; ++t) {
      threads.emplace_back([&, p] {
        auto lock = clients[p]->create_lock(name);
        for (int i = 0; i < iterations; ++i) {
          try {
            auto handle = lock.acquire(60s);
            if (inside.fetch_add(1) != 0) ++overlaps;
            {
              std::lock_guard guard(tokens_mutex);
              tokens.push_back(handle.fencing_token());
            }
            std::this_thread::yield();
            inside.fetch_sub(1);
          } catch (...) {
            ++failures;
          }
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  CHECK(overlaps == 0);
  CHECK(failures == 0);
  // Grants are serialised, so tokens recorded in grant order strictly increase.
  REQUIRE(tokens.size() == providers * threads_per_provider * iterations);
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    INFO("grant " << i);
    REQUIRE(tokens[i] > tokens[i - 1]);
  }
}

TEST_CASE("a blocking acquire on the provider's own thread is a logic_error",
          "[contract][acquire]") {
  auto provider = backend().make_provider();
  auto lock = provider->create_lock(unique_name("own-thread"));
  std::atomic<int> outcome{0};
  boost::asio::post(provider->get_executor(), [&] {
    try {
      (void)lock.try_acquire();
      outcome = 1;
    } catch (const std::logic_error&) {
      outcome = 2;
    }
  });
  REQUIRE(wait_until([&] { return outcome.load() != 0; }));
  CHECK(outcome == 2);
}
