// Minimum hold: a lock released early stays held until grant + min_hold by the server's clock,
// for every acquirer of the name, on each backend that keeps it; the others refuse it when the
// lock (or the provider's default) is made, never at an acquire.
#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "backend.hpp"
#include "min_hold_support.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using contract::keeps_min_hold;
using contract::min_hold;
using support::unique_name;

namespace {

using clock_type = std::chrono::steady_clock;

}  // namespace

TEST_CASE("a backend that cannot keep a minimum hold refuses it up front, saying why",
          "[contract][min_hold]") {
  auto provider = backend().make_provider();
  if (keeps_min_hold(*provider)) DLOCK_SKIP(backend().label() << " keeps minimum holds");
  CHECK_THROWS_WITH(provider->create_lock("refused").with_min_hold(min_hold),
                    Catch::Contains("min_hold") && Catch::Contains("not kept by this backend"));
  CHECK_THROWS_AS(provider->set_default_min_hold(min_hold), std::invalid_argument);
  CHECK_NOTHROW(provider->create_lock("refused").with_min_hold(0s));
}

TEST_CASE("a lock released before its minimum hold stays held until grant + min_hold, then "
          "goes to another acquirer with a higher token",
          "[contract][deployment][min_hold]") {
  auto provider = backend().make_provider();
  if (!keeps_min_hold(*provider)) DLOCK_SKIP(backend().label() << " refuses minimum holds");
  CHECK_THROWS_WITH(provider->create_lock("negative").with_min_hold(-1s),
                    Catch::Contains("negative min_hold for lock 'negative'"));
  auto other = backend().make_provider();
  const auto name = unique_name("min-hold");
  const auto asked = clock_type::now();
  auto held = provider->create_lock(name).with_min_hold(min_hold).acquire(10s);
  const std::uint64_t token = held.fencing_token();
  held.release();
  // Asked without the option, as any other acquirer would: refused while the hold lasts.
  if (clock_type::now() - asked < min_hold / 2) CHECK_FALSE(other->create_lock(name).try_acquire());
  auto next = other->create_lock(name).acquire(min_hold + 30s);
  CHECK(clock_type::now() - asked >= min_hold - contract::clock_slack);
  CHECK(next.fencing_token() > token);
}

TEST_CASE("a lock held past its minimum hold is free as soon as it is released",
          "[contract][min_hold]") {
  auto provider = backend().make_provider();
  if (!keeps_min_hold(*provider)) DLOCK_SKIP(backend().label() << " refuses minimum holds");
  auto other = backend().make_provider();
  const auto name = unique_name("min-hold-passed");
  constexpr auto short_hold = 300ms;
  const auto asked = clock_type::now();
  auto held = provider->create_lock(name).with_min_hold(short_hold).acquire(10s);
  // Past the hold by the server's clock too (a second of margin for a server clock ahead).
  std::this_thread::sleep_until(asked + short_hold + 1s);
  held.release();
  CHECK(other->create_lock(name).try_acquire());
}

TEST_CASE("the provider's default minimum hold applies to its locks unless one overrides it",
          "[contract][min_hold]") {
  auto provider = backend().make_provider();
  if (!keeps_min_hold(*provider)) DLOCK_SKIP(backend().label() << " refuses minimum holds");
  auto other = backend().make_provider();
  provider->set_default_min_hold(min_hold);
  const auto held_on = unique_name("min-hold-default");
  const auto free_on = unique_name("min-hold-overridden");
  const auto asked = clock_type::now();
  provider->create_lock(held_on).acquire(10s).release();
  provider->create_lock(free_on).with_min_hold(0s).acquire(10s).release();
  if (clock_type::now() - asked < min_hold / 2) {
    CHECK_FALSE(other->create_lock(held_on).try_acquire());
  }
  CHECK(other->create_lock(free_on).try_acquire());
}
