// Core's clock (core/src/validity_clock.hpp): a lease whose grant is valid only until a time is
// lost once that time has passed, with no thread of any backend running, and never before.
// A lease that must not be lost is checked once a later one was: the clock reports in time order.
#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <chrono>
#include <memory>
#include <stop_token>

#include <dlock/core/backend/lease.hpp>

#include "support.hpp"
#include "validity_clock.hpp"

namespace {

using namespace std::chrono_literals;
using steady = dlock::grant_validity::clock;

// A grant as a leased backend makes one, with nothing behind it to release.
class timed_lease final : public dlock::lease {
 public:
  explicit timed_lease(std::shared_ptr<dlock::grant_validity> validity)
      : lease(7, std::move(validity)) {}
  void release() override {}
};

std::shared_ptr<dlock::grant_validity> valid_for(steady::duration span) {
  return std::make_shared<dlock::grant_validity>(steady::now() + span);
}

// When the lease's lost token was stopped, and whether on the clock's thread.
struct loss_record {
  std::atomic<steady::rep> at{0};
  std::atomic<bool> on_clock_thread{false};
};

using loss_watch = std::stop_callback<std::function<void()>>;

std::function<void()> recorder(loss_record& record) {
  return [&record] {
    record.on_clock_thread = dlock::detail::on_validity_clock_thread();
    record.at = steady::now().time_since_epoch().count();
  };
}

}  // namespace

TEST_CASE("a lease bounded by the clock is lost once its validity passes and never before",
          "[unit][lost]") {
  auto validity = valid_for(300ms);
  timed_lease lease(validity);
  loss_record record;
  loss_watch watch(lease.lost_token(), recorder(record));
  const auto until = lease.valid_until();
  CHECK(until == validity->until());
  if (steady::now() < until) CHECK_FALSE(lease.lost());

  REQUIRE(support::wait_until([&] { return lease.lost_token().stop_requested(); }, 10s));
  CHECK(lease.lost());
  CHECK(steady::time_point(steady::duration(record.at.load())) >= until);
  CHECK(record.on_clock_thread);
}

TEST_CASE("a renewed lease stays held, and a late answer to an older renewal does not shorten it",
          "[unit][lost]") {
  auto renewed_validity = valid_for(100ms);
  timed_lease renewed(renewed_validity);
  const auto renewed_until = steady::now() + 1h;
  renewed_validity->extend_to(renewed_until);
  renewed_validity->extend_to(steady::now() + 50ms);
  CHECK(renewed.valid_until() == renewed_until);

  // The clock wakes for the renewed lease first (at 100 ms), then for this one.
  timed_lease witness(valid_for(200ms));
  REQUIRE(support::wait_until([&] { return witness.lost_token().stop_requested(); }, 10s));
  CHECK_FALSE(renewed.lost());
  CHECK_FALSE(renewed.lost_token().stop_requested());
}

TEST_CASE("a destroyed lease is taken off the clock", "[unit][lost]") {
  std::stop_token gone_token;
  {
    timed_lease gone(valid_for(100ms));
    gone_token = gone.lost_token();
  }
  timed_lease witness(valid_for(200ms));
  REQUIRE(support::wait_until([&] { return witness.lost_token().stop_requested(); }, 10s));
  CHECK_FALSE(gone_token.stop_requested());
}

TEST_CASE("a lease marked lost is lost at once whatever its validity", "[unit][lost]") {
  timed_lease lease(valid_for(1h));
  CHECK_FALSE(lease.lost());
  lease.mark_lost();
  CHECK(lease.lost());
  CHECK(lease.lost_token().stop_requested());
}

TEST_CASE("a validity made of two ends at the earlier of theirs, as each is renewed",
          "[unit][lost]") {
  auto first = valid_for(1h);
  auto second = valid_for(2h);
  dlock::grant_validity both(first, second);
  CHECK(both.until() == first->until());
  first->extend_to(steady::now() + 3h);
  CHECK(both.until() == second->until());
  // A part swapped out (a gated grant between its read and its write) bounds nothing.
  both.replace_second(nullptr);
  CHECK(both.until() == first->until());
  dlock::grant_validity unbounded(nullptr, nullptr);
  CHECK(unbounded.until() == steady::time_point::max());
}

TEST_CASE("a lease made of two is lost by the clock when the first of them runs out",
          "[unit][lost]") {
  auto long_one = valid_for(1h);
  auto short_one = valid_for(200ms);
  timed_lease inner_long(long_one);
  timed_lease inner_short(short_one);
  timed_lease both(std::make_shared<dlock::grant_validity>(inner_long.validity(),
                                                           inner_short.validity()));
  loss_record record;
  loss_watch watch(both.lost_token(), recorder(record));
  const auto until = short_one->until();
  CHECK(both.valid_until() == until);
  REQUIRE(support::wait_until([&] { return both.lost_token().stop_requested(); }, 10s));
  CHECK(steady::time_point(steady::duration(record.at.load())) >= until);
  CHECK(record.on_clock_thread);
  CHECK_FALSE(inner_long.lost());
}

TEST_CASE("a lease made after the clock's last one went is lost at its own end",
          "[unit][lost]") {
  // The clock sleeps on toward the end of a lease that went rather than wake for the next
  // grant (a handoff's). A lease that ends before that end must wake it all the same.
  const bool ends_first = GENERATE(true, false);
  timed_lease warm(valid_for(1ms));  // the clock's thread runs, and is asleep, before `gone`
  REQUIRE(support::wait_until([&] { return warm.lost_token().stop_requested(); }, 10s));
  { timed_lease gone(valid_for(ends_first ? 1h : 100ms)); }
  auto validity = valid_for(300ms);
  timed_lease lease(validity);
  REQUIRE(support::wait_until([&] { return lease.lost_token().stop_requested(); }, 10s));
  CHECK(steady::now() >= validity->until());
}
