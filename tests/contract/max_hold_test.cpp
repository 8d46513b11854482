// Maximum hold time: a grant kept too long is taken back, on every backend.
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("a grant held past its max_hold is lost and the lock is free for others",
          "[contract][deployment][max_hold]") {
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  const auto name = unique_name("max-hold");
  auto held = provider->create_lock(name).with_max_hold(100ms).acquire(10s);
  CHECK(wait_until([&] { return held.lost(); }, 30s));
  CHECK(held.lost_token().stop_requested());
  CHECK(other->create_lock(name).try_acquire(30s));
  CHECK_NOTHROW(held.release());  // what is left of it
}

TEST_CASE("max_hold applies to read locks and semaphore slots too", "[contract][max_hold]") {
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  const auto rw_name = unique_name("max-hold-rw");
  const auto sem_name = unique_name("max-hold-sem");
  auto read = provider->create_reader_writer_lock(rw_name).with_max_hold(100ms).acquire_read();
  auto slot = provider->create_semaphore(sem_name, 1).with_max_hold(100ms).acquire();
  CHECK(other->create_reader_writer_lock(rw_name).try_acquire_write(30s));
  CHECK(other->create_semaphore(sem_name, 1).try_acquire(30s));
  CHECK(read.lost());
  CHECK(slot.lost());
}

TEST_CASE("the provider's default max_hold applies unless a lock overrides it",
          "[contract][max_hold]") {
  auto provider = backend().make_provider();
  provider->set_default_max_hold(100ms);
  auto limited = provider->create_lock(unique_name("default-hold")).acquire(10s);
  auto unlimited =
      provider->create_lock(unique_name("no-hold")).with_max_hold(0s).acquire(10s);
  CHECK(wait_until([&] { return limited.lost(); }, 30s));
  // Well past the default: the overridden one is still held.
  CHECK_FALSE(wait_until([&] { return unlimited.lost(); }, 300ms));
}

TEST_CASE("a lock released before its max_hold leaves later holders alone",
          "[contract][max_hold]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("early-release");
  provider->create_lock(name).with_max_hold(100ms).acquire(10s).release();
  auto later = provider->create_lock(name).acquire(10s);
  CHECK_FALSE(wait_until([&] { return later.lost(); }, 300ms));
}

TEST_CASE("a negative max_hold is invalid_argument", "[contract][max_hold]") {
  auto provider = backend().make_provider();
  CHECK_THROWS_AS(provider->create_lock("x").with_max_hold(-1ms), std::invalid_argument);
  CHECK_THROWS_WITH(provider->create_lock("report").with_max_hold(-1ms),
                    Catch::Contains("negative max_hold") && Catch::Contains("report"));
  CHECK_THROWS_WITH(provider->set_default_max_hold(-1ms), Catch::Contains("negative"));
}

TEST_CASE("max_hold covers an upgradeable read and its upgrade, gate included",
          "[contract][max_hold][upgradeable]") {
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  const auto name = unique_name("max-hold-upgradeable");
  auto held =
      provider->create_reader_writer_lock(name).with_max_hold(300ms).acquire_upgradeable_read();
  const auto lost = held.lost_token();
  held.upgrade(10s);
  CHECK(wait_until([&] { return lost.stop_requested(); }, 30s));
  CHECK(other->create_reader_writer_lock(name).try_acquire_upgradeable_read(30s));
  CHECK(held.upgraded());
  CHECK_THROWS_AS(held.upgrade(), std::logic_error);  // upgraded already (and lost)
  CHECK_NOTHROW(held.release());
}
