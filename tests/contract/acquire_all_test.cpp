// acquire_all: several locks at once, in one canonical order, with one timeout.
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <thread>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

/// Two threads with a provider each make `iterations` calls of `attempt(provider, mirrored)`
/// (one thread mirrored); returns how many calls failed. A deadlock shows as failures, since
/// every attempt has a timeout.
int failures_of_two_contenders(
    const std::function<std::optional<dlock::lock_set>(dlock::provider&, bool)>& attempt,
    int iterations) {
  std::atomic<int> failures{0};
  auto contend = [&](std::shared_ptr<dlock::provider> provider, bool mirrored) {
    for (int i = 0; i < iterations; ++i) {
      if (!attempt(*provider, mirrored)) ++failures;
    }
  };
  std::thread one(contend, backend().make_provider(), false);
  std::thread two(contend, backend().make_provider(), true);
  one.join();
  two.join();
  return failures;
}

}  // namespace

TEST_CASE("acquire_all takes every listed lock, and releasing the set frees them all",
          "[contract][deployment][acquire_all]") {
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  const auto a = unique_name("all-a");
  const auto b = unique_name("all-b");
  const auto s = unique_name("all-s");
  auto rw = provider->create_reader_writer_lock(unique_name("all-rw"));
  dlock::lock_set held = dlock::acquire_all(
      {provider->create_lock(a), provider->create_semaphore(s, 1), provider->create_lock(b),
       dlock::lock_request::read(rw)},
      10s);
  REQUIRE(held.size() == 4);
  CHECK_FALSE(held.lost());
  // Entries keep the listed order.
  CHECK(held[0].name() == a);
  CHECK(held[2].name() == b);
  CHECK(held.fencing_token(0) > 0);
  CHECK_FALSE(other->create_lock(a).try_acquire());
  CHECK_FALSE(other->create_lock(b).try_acquire());
  CHECK_FALSE(other->create_semaphore(s, 1).try_acquire());
  CHECK(other->create_reader_writer_lock(rw.name()).try_acquire_read());
  CHECK_FALSE(other->create_reader_writer_lock(rw.name()).try_acquire_write());
  held.release();
  CHECK_FALSE(held);
  CHECK(other->create_lock(a).try_acquire());
  CHECK(other->create_lock(b).try_acquire());
  CHECK(other->create_semaphore(s, 1).try_acquire());
}

TEST_CASE("try_acquire_all that cannot take one lock releases exactly what it took",
          "[contract][acquire_all]") {
  auto holder = backend().make_provider();
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  const auto a = unique_name("partial-a");
  const auto b = unique_name("partial-b");
  const auto c = unique_name("partial-c");
  auto held_b = holder->create_lock(b).acquire();
  CHECK_FALSE(dlock::try_acquire_all(
      {provider->create_lock(c), provider->create_lock(b), provider->create_lock(a)}, 50ms));
  CHECK(other->create_lock(a).try_acquire());
  CHECK(other->create_lock(c).try_acquire());
  CHECK_FALSE(other->create_lock(b).try_acquire());  // still the holder's
  CHECK_FALSE(held_b.lost());
  CHECK_THROWS_AS(
      dlock::acquire_all({provider->create_lock(a), provider->create_lock(b)}, 0ms),
      dlock::timeout_error);
  CHECK(other->create_lock(a).try_acquire());
}

TEST_CASE("acquire_all rejects an empty list, a lock listed twice and a negative timeout",
          "[contract][acquire_all]") {
  auto provider = backend().make_provider();
  const auto a = unique_name("twice");
  CHECK_THROWS_WITH(dlock::try_acquire_all({}), Catch::Contains("at least one lock"));
  CHECK_THROWS_WITH(dlock::try_acquire_all({provider->create_lock(a), provider->create_lock(a)}),
                    Catch::Contains(a) && Catch::Contains("twice"));
  CHECK_THROWS_WITH(dlock::try_acquire_all({provider->create_lock(a)}, -1ms),
                    Catch::Contains("negative timeout"));
  CHECK(provider->create_lock(a).try_acquire());  // nothing was taken
}

TEST_CASE("two contenders listing the same locks in opposite orders never deadlock",
          "[contract][acquire_all]") {
  const auto a = unique_name("order-a");
  const auto b = unique_name("order-b");
  CHECK(failures_of_two_contenders(
            [&](dlock::provider& provider, bool mirrored) {
              auto la = provider.create_lock(a);
              auto lb = provider.create_lock(b);
              return mirrored ? dlock::try_acquire_all({lb, la}, 30s)
                              : dlock::try_acquire_all({la, lb}, 30s);
            },
            100) == 0);
}

TEST_CASE("each later lock gets only what remains of the one timeout",
          "[contract][acquire_all]") {
  auto holder = backend().make_provider();
  auto provider = backend().make_provider();
  const auto a = unique_name("remaining-a");
  const auto b = unique_name("remaining-b");
  auto held_a = holder->create_lock(a).acquire();
  auto held_b = holder->create_lock(b).acquire();
  std::string message;
  std::atomic<bool> finished{false};
  std::thread waiter([&] {
    try {
      (void)dlock::acquire_all({provider->create_lock(b), provider->create_lock(a)}, 1500ms);
    } catch (const dlock::timeout_error& e) {
      message = e.what();
    }
    finished = true;
  });
  // Let part of the timeout pass waiting for the first lock, then free it.
  std::this_thread::sleep_for(100ms);
  held_a.release();
  REQUIRE(wait_until([&] { return finished.load(); }, 30s));
  waiter.join();
  // The wait for the second lock was given less than the whole 1500 ms.
  INFO(message);
  REQUIRE_THAT(message, Catch::Contains("timed out after") && Catch::Contains(b));
  CHECK_THAT(message, !Catch::Contains("after 1500ms") && !Catch::Contains("after 1s"));
  CHECK(provider->create_lock(a).try_acquire());  // released after the failure
}

TEST_CASE("a lock set is lost when any one of its locks is", "[contract][acquire_all][lost]") {
  auto provider = backend().make_provider();
  const auto a = unique_name("set-lost-a");
  const auto b = unique_name("set-lost-b");
  auto held = dlock::acquire_all({provider->create_lock(a), provider->create_lock(b)}, 10s);
  CHECK_FALSE(held.lost());
  backend().break_lock(b);
  CHECK(wait_until([&] { return held.lost(); }, 30s));
  CHECK(held.lost_token().stop_requested());
  // Breaking b may or may not take a with it (a backend may hold both on one connection);
  // either way a's handle must tell the truth about whether a still excludes others.
  auto other = backend().make_provider();
  if (held[0].lost()) {
    CHECK(wait_until([&] { return other->create_lock(a).try_acquire().has_value(); }, 30s));
  } else {
    CHECK_FALSE(other->create_lock(a).try_acquire());
  }
}

TEST_CASE("async_acquire_all completes through a future", "[contract][acquire_all][async]") {
  auto provider = backend().make_provider();
  const auto a = unique_name("async-all-a");
  const auto b = unique_name("async-all-b");
  auto future = dlock::async_acquire_all({provider->create_lock(a), provider->create_lock(b)},
                                         10s, {}, boost::asio::use_future);
  dlock::lock_set held = future.get();
  CHECK(held.size() == 2);
  held.release();
  auto holder = backend().make_provider();
  auto blocked = holder->create_lock(a).acquire();
  auto failed = dlock::async_try_acquire_all(
      {provider->create_lock(b), provider->create_lock(a)}, 0ms, {}, boost::asio::use_future);
  CHECK_FALSE(failed.get());
  CHECK(provider->create_lock(b).try_acquire());
}

TEST_CASE("a lock and a reader-writer lock of one name keep their place in the order",
          "[contract][acquire_all]") {
  // On backends where they are one resource, lists mixing them must not cross either.
  const auto a = unique_name("mixed-a");
  const auto b = unique_name("mixed-b");
  CHECK(failures_of_two_contenders(
            [&](dlock::provider& provider, bool mirrored) {
              auto write = [&](const std::string& name) {
                return dlock::lock_request::write(provider.create_reader_writer_lock(name));
              };
              return mirrored ? dlock::try_acquire_all({write(b), provider.create_lock(a)}, 30s)
                              : dlock::try_acquire_all({provider.create_lock(b), write(a)}, 30s);
            },
            50) == 0);
}

TEST_CASE("async acquire_all rejects bad arguments at the call", "[contract][acquire_all]") {
  auto provider = backend().make_provider();
  CHECK_THROWS_AS(dlock::async_try_acquire_all({}, 0s, {}, boost::asio::use_future),
                  std::invalid_argument);
  CHECK_THROWS_AS(dlock::async_acquire_all({provider->create_lock(unique_name("neg"))}, -1s, {},
                                           boost::asio::use_future),
                  std::invalid_argument);
  dlock::lock_set empty;
  CHECK_THROWS_AS(empty[0], std::out_of_range);
}
