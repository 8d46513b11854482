// Async acquire with Asio completion tokens: callbacks, use_future, use_awaitable.
#include <dirent.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

int thread_count() {
  int count = 0;
  if (DIR* tasks = ::opendir("/proc/self/task")) {
    while (dirent* entry = ::readdir(tasks)) count += entry->d_name[0] != '.';
    ::closedir(tasks);
  }
  return count;
}

}  // namespace

TEST_CASE("async_try_acquire completes a callback on the provider's executor",
          "[contract][async]") {
  auto provider = backend().make_provider();
  std::atomic<int> outcome{0};
  provider->create_lock(unique_name("callback"))
      .async_try_acquire(1s, {}, [&](std::exception_ptr error,
                                     std::optional<dlock::lock_handle> handle) {
        outcome = !error && handle && handle->fencing_token() > 0 ? 1 : 2;
      });
  REQUIRE(wait_until([&] { return outcome.load() != 0; }));
  CHECK(outcome == 1);
}

TEST_CASE("async_acquire with use_future rethrows timeout_error", "[contract][async]") {
  const auto name = unique_name("future");
  auto holder = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  auto provider = backend().make_provider();
  std::future<dlock::lock_handle> result =
      provider->create_lock(name).async_acquire(20ms, {}, boost::asio::use_future);
  REQUIRE_THROWS_AS(result.get(), dlock::timeout_error);

  std::future<std::optional<dlock::lock_handle>> empty =
      provider->create_lock(name).async_try_acquire(0s, {}, boost::asio::use_future);
  CHECK_FALSE(empty.get());
  held.release();
  CHECK(provider->create_lock(name).async_acquire(10s, {}, boost::asio::use_future).get());
}

TEST_CASE("async_acquire works in a C++20 coroutine with use_awaitable",
          "[contract][deployment][async]") {
  const auto name = unique_name("coroutine");
  auto provider = backend().make_provider();
  boost::asio::io_context io;
  std::uint64_t token = 0;
  bool timed_out = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto lock = provider->create_lock(name);
        dlock::lock_handle held = co_await lock.async_acquire(10s, {}, boost::asio::use_awaitable);
        token = held.fencing_token();
        try {
          auto again = co_await lock.async_acquire(10ms, {}, boost::asio::use_awaitable);
        } catch (const dlock::timeout_error&) {
          timed_out = true;
        }
      },
      boost::asio::detached);
  io.run();
  CHECK(token > 0);
  CHECK(timed_out);
}

TEST_CASE("a use_awaitable acquire starts at its co_await and goes on on the coroutine's thread",
          "[contract][async]") {
  const auto name = unique_name("awaitable-lazy");
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  boost::asio::io_context io;
  bool free_before_await = false;
  bool empty_when_held = false;
  bool timed_out_when_held = false;
  std::thread::id resumed_on;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto pending = provider->create_lock(name).async_acquire(10s, {}, boost::asio::use_awaitable);
        free_before_await = other->create_lock(name).try_acquire().has_value();
        dlock::lock_handle held = co_await std::move(pending);
        resumed_on = std::this_thread::get_id();
        auto contender = other->create_lock(name);
        empty_when_held =
            !(co_await contender.async_try_acquire(0s, {}, boost::asio::use_awaitable));
        try {
          co_await contender.async_acquire(0s, {}, boost::asio::use_awaitable);
        } catch (const dlock::timeout_error&) {
          timed_out_when_held = true;
        }
      },
      boost::asio::detached);
  io.run();
  CHECK(free_before_await);
  CHECK(resumed_on == std::this_thread::get_id());
  CHECK(empty_when_held);
  CHECK(timed_out_when_held);
}

TEST_CASE("a negative timeout is rejected when the async operation is initiated",
          "[contract][async]") {
  auto lock = backend().make_provider()->create_lock(unique_name("async-negative"));
  REQUIRE_THROWS_AS(lock.async_acquire(-1s, {}, boost::asio::use_future), std::invalid_argument);
}

TEST_CASE("a stop request cancels an async wait", "[contract][deployment][async][cancel]") {
  const auto name = unique_name("async-stop");
  auto holder = backend().make_provider();
  auto held = holder->create_lock(name).acquire();
  auto provider = backend().make_provider();
  std::stop_source stop;
  auto result = provider->create_lock(name).async_acquire(dlock::forever, stop.get_token(),
                                                          boost::asio::use_future);
  stop.request_stop();
  REQUIRE(result.wait_for(10s) == std::future_status::ready);
  REQUIRE_THROWS_AS(result.get(), dlock::cancelled_error);
}

TEST_CASE("waiting async acquires hold no thread", "[contract][async]") {
  auto holder = backend().make_provider();
  auto provider = backend().make_provider();
  constexpr int waits = 64;
  std::vector<dlock::lock_handle> held;
  std::vector<std::string> names;
  for (int i = 0; i < waits; ++i) {
    names.push_back(unique_name("threadless"));
    held.push_back(holder->create_lock(names.back()).acquire());
  }
  const int threads_before = thread_count();
  std::stop_source stop;
  std::atomic<int> finished{0};
  for (const auto& name : names) {
    provider->create_lock(name).async_acquire(
        dlock::forever, stop.get_token(),
        [&](std::exception_ptr, dlock::lock_handle) { ++finished; });
  }
  // A thread per wait would show up here; the provider may add a few of its own.
  CHECK(thread_count() < threads_before + 8);
  stop.request_stop();
  REQUIRE(wait_until([&] { return finished.load() == waits; }));
}

TEST_CASE("a provider dropped as soon as use_future delivers its acquire shuts down cleanly",
          "[contract][async]") {
  // The future is ready while the threads that delivered it are still unwinding; dropping
  // the handle and the provider at once must wait for them, not race with them.
  for (int round = 0; round < 10; ++round) {
    const auto name = unique_name("future-teardown");
    auto provider = backend().make_provider();
    auto handle = provider->create_lock(name).async_acquire(10s, {}, boost::asio::use_future);
    CHECK(handle.get().fencing_token() > 0);
    provider.reset();
    auto empty = backend().make_provider()->create_lock(name).async_try_acquire(
        0s, {}, boost::asio::use_future);
    CHECK(empty.get());
  }
}
