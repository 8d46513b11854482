// What a withdrawn wait leaves on the server: nothing. A stop request or a timeout ends a
// waiting acquire of every primitive, and the server then holds what it held before the wait
// (no orphan node, key, queue entry, subscription or queued request; DESIGN.md, "Acquire
// semantics"), as backend().server_footprint() shows where the backend can be looked at.
#include <chrono>
#include <functional>
#include <future>
#include <stop_token>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "acquire_machine.hpp"  // core's stop_grace
#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

using pending_grant = std::future<std::optional<dlock::lock_handle>>;

// One way to be kept waiting: what the holder takes, and the waiter's acquire of the same name.
struct contention {
  std::string what;
  dlock::primitive kind;
  std::function<dlock::lock_handle(dlock::provider&, const std::string&)> hold;
  std::function<pending_grant(dlock::provider&, const std::string&, std::chrono::milliseconds,
                              std::stop_token)>
      wait;
};

// A reader-writer lock held in one mode, and a waiter for the other mode.
contention reader_writer(std::string what, bool holder_writes) {
  return {std::move(what), dlock::primitive::reader_writer_lock,
          [holder_writes](dlock::provider& p, const std::string& name) {
            auto rw = p.create_reader_writer_lock(name);
            return holder_writes ? rw.acquire_write(10s) : rw.acquire_read(10s);
          },
          [holder_writes](dlock::provider& p, const std::string& name, auto timeout,
                          std::stop_token stop) {
            using boost::asio::use_future;
            auto rw = p.create_reader_writer_lock(name);
            return holder_writes ? rw.async_try_acquire_read(timeout, stop, use_future)
                                 : rw.async_try_acquire_write(timeout, stop, use_future);
          }};
}

std::vector<contention> contentions() {
  using boost::asio::use_future;
  return {
      {"a lock behind its holder", dlock::primitive::lock,
       [](dlock::provider& p, const std::string& name) { return p.create_lock(name).acquire(10s); },
       [](dlock::provider& p, const std::string& name, auto timeout, std::stop_token stop) {
         return p.create_lock(name).async_try_acquire(timeout, stop, use_future);
       }},
      reader_writer("a writer behind a reader", false),
      reader_writer("a reader behind a writer", true),
      {"a semaphore behind its max_count holders", dlock::primitive::semaphore,
       [](dlock::provider& p, const std::string& name) {
         return p.create_semaphore(name, 1).acquire(10s);
       },
       [](dlock::provider& p, const std::string& name, auto timeout, std::stop_token stop) {
         return p.create_semaphore(name, 1).async_try_acquire(timeout, stop, use_future);
       }},
  };
}

std::optional<dlock::lock_handle> outcome_of(pending_grant& grant) {
  REQUIRE(grant.wait_for(10s) == std::future_status::ready);
  return grant.get();
}

// What the server holds for `name` once it stopped changing by itself: an acquire may return
// while its grant still spreads (RedLock answers on a majority; the last node's write lands
// later), and that is no trace of the wait that follows.
std::optional<std::vector<std::string>> settled_footprint(const std::string& name) {
  auto last = backend().server_footprint(name);
  auto unchanged_since = std::chrono::steady_clock::now();
  wait_until(
      [&] {
        auto now = backend().server_footprint(name);
        if (now != last) {
          last = std::move(now);
          unchanged_since = std::chrono::steady_clock::now();
        }
        return std::chrono::steady_clock::now() - unchanged_since >= 200ms;
      },
      5s);
  return last;
}

// A name held as `c` says, a waiter's provider, and what the server holds before the wait.
struct held_name {
  held_name(const contention& c, const std::string& base)
      : c(c), name(unique_name(base)), held(c.hold(*holder, name)),
        before(settled_footprint(name)) {}

  bool footprint_as_before() const {
    return !before || wait_until([&] { return backend().server_footprint(name) == before; });
  }

  // After the withdrawn wait: nothing of it keeps the waiter from the name once the holder
  // releases (a one-shot attempt succeeds), and released grants leave nothing at all.
  void check_nothing_left() {
    held.release();
    auto next = c.wait(*waiter, name, 0ms, {});
    auto granted = outcome_of(next);
    CHECK(granted);
    if (granted) granted->release();
    if (before) CHECK(wait_until([&] { return backend().server_footprint(name)->empty(); }));
  }

  const contention& c;
  std::shared_ptr<dlock::provider> holder = backend().make_provider();
  std::shared_ptr<dlock::provider> waiter = backend().make_provider();
  std::string name;
  dlock::lock_handle held;
  std::optional<std::vector<std::string>> before;
};

}  // namespace

TEST_CASE("a stop request while waiting leaves nothing on the server",
          "[contract][deployment][cancel]") {
  for (const contention& c : contentions()) {
    DYNAMIC_SECTION(c.what) {
      held_name scene(c, "stopped");
      if (scene.before) REQUIRE_FALSE(scene.before->empty());  // the probe sees the holder
      if (!scene.before) WARN(backend().label() << " cannot show what its server holds");

      std::stop_source stop;
      auto waiting = c.wait(*scene.waiter, scene.name, 1h, stop.get_token());
      REQUIRE(wait_until([&] { return scene.waiter->metrics().waits == 1; }));
      if (scene.before && backend().footprint_shows_waiters(c.kind)) {
        // The wait reached the server (a queued node or request, a subscription).
        REQUIRE(wait_until(
            [&] { return backend().server_footprint(scene.name) != scene.before; }));
      }
      stop.request_stop();
      CHECK_FALSE(outcome_of(waiting));
      CHECK(scene.footprint_as_before());
      scene.check_nothing_left();
    }
  }
}

TEST_CASE("a stop request leaves nothing on the server even when its provider goes at once",
          "[contract][cancel]") {
  // As a process does that exits on a signal once its wait ended (the CLI): whatever the
  // withdrawal still had to tell the server was told before the stop was answered, so the
  // name is free for the next one at once. A stop answered at stop_grace (the server had not
  // confirmed yet: a loaded machine) was answered before that; the withdrawal goes on behind
  // the gone provider and frees the name soon after, well before the server would drop a
  // leftover by itself (the backends' test expiries, leases and sessions are 3 s or more).
  constexpr auto withdrawal_behind = 1s;
  for (const contention& c : contentions()) {
    DYNAMIC_SECTION(c.what) {
      held_name scene(c, "stopped-then-gone");
      bool confirmed = false;
      {
        auto gone = backend().make_provider();
        std::stop_source stop;
        auto waiting = c.wait(*gone, scene.name, 1h, stop.get_token());
        REQUIRE(wait_until([&] { return gone->metrics().waits == 1; }));
        if (scene.before && backend().footprint_shows_waiters(c.kind)) {
          REQUIRE(wait_until(
              [&] { return backend().server_footprint(scene.name) != scene.before; }));
        }
        const auto stopped_at = std::chrono::steady_clock::now();
        stop.request_stop();
        CHECK_FALSE(outcome_of(waiting));
        confirmed = std::chrono::steady_clock::now() - stopped_at < dlock::detail::stop_grace;
      }
      scene.held.release();
      auto next = c.wait(*scene.waiter, scene.name, 0ms, {});
      auto granted = outcome_of(next);
      if (!confirmed && !granted) {
        WARN("the stop was answered at stop_grace; the withdrawal may still be on its way");
        CHECK(wait_until(
            [&] {
              auto again = c.wait(*scene.waiter, scene.name, 0ms, {});
              granted = outcome_of(again);
              return granted.has_value();
            },
            withdrawal_behind));
      }
      CHECK(granted);
    }
  }
}

TEST_CASE("a timed-out wait leaves nothing on the server", "[contract][deployment][cancel]") {
  for (const contention& c : contentions()) {
    DYNAMIC_SECTION(c.what) {
      held_name scene(c, "timed-out");
      // Long enough for the first attempt to come back and the wait to begin, under load.
      auto waiting = c.wait(*scene.waiter, scene.name, 500ms, {});
      CHECK_FALSE(outcome_of(waiting));
      CHECK(scene.waiter->metrics().waits == 1);
      CHECK(scene.footprint_as_before());
      scene.check_nothing_left();
    }
  }
}
