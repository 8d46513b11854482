// The contract under a partition (docs/semantics.md), stated once and run against every
// networked backend (scenario.hpp, backends.cpp): the client on path A is cut off from its
// servers while a contender on path B still reaches them.
//
// Each case prints what it measured (WARN: in `ctest -V` or Testing/Temporary/LastTest.log);
// deadlines are the backend's promised bound plus a margin, so a backend that breaks its
// promise fails in finite time instead of hanging the run.
#include <catch2/catch.hpp>

#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <stop_token>
#include <thread>
#include <vector>

#include <dlock/dlock.hpp>

#include "scenario.hpp"
#include "stall_watch.hpp"
#include "support.hpp"
#include "timing.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using support::net_path;
using milliseconds = std::chrono::milliseconds;

// How long past a promised bound a case waits before it calls the promise broken.
milliseconds deadline(milliseconds bound) { return bound + bound / 2 + 2s; }

milliseconds since(clock_type::time_point start) {
  return std::chrono::duration_cast<milliseconds>(clock_type::now() - start);
}

// How an acquire ended, recorded on the thread that ran it and checked on the main thread.
struct outcome {
  enum kind { granted, not_obtained, connection_error, timeout_error, cancelled, other_error };
  kind how = other_error;
  std::string what;
  milliseconds took{};
  std::optional<dlock::lock_handle> handle;
  clock_type::time_point ended;

  /// Measures `took` from `start` (for acquires whose start is known only later: a cut).
  void measure_from(clock_type::time_point start) {
    took = std::chrono::duration_cast<milliseconds>(ended - start);
  }
};

std::string describe(const outcome& o) {
  static const char* const names[] = {"granted",       "not obtained", "connection_error",
                                      "timeout_error", "cancelled",    "another error"};
  return std::string(names[o.how]) + (o.what.empty() ? "" : " (" + o.what + ")") + " after " +
         std::to_string(o.took.count()) + " ms";
}

std::string describe(const dlock::provider_health& health) {
  std::string text = health.ok() ? "ok" : "";
  for (const auto& problem : health.problems) text += (text.empty() ? "" : "; ") + problem;
  return text;
}

// Runs an acquire and classifies how it ended, measuring from `start`.
template <class Acquire>
outcome run_acquire(Acquire&& acquire, clock_type::time_point start) {
  outcome o;
  try {
    std::optional<dlock::lock_handle> handle = acquire();
    o.how = handle ? outcome::granted : outcome::not_obtained;
    o.handle = std::move(handle);
  } catch (const dlock::connection_error& e) {
    o.how = outcome::connection_error;
    o.what = e.what();
  } catch (const dlock::timeout_error& e) {
    o.how = outcome::timeout_error;
    o.what = e.what();
  } catch (const dlock::cancelled_error& e) {
    o.how = outcome::cancelled;
    o.what = e.what();
  } catch (const std::exception& e) {
    o.how = outcome::other_error;
    o.what = e.what();
  }
  o.ended = clock_type::now();
  o.measure_from(start);
  return o;
}

// The contract after a heal: the acquire was granted, within `bound`. On the main thread only.
void check_granted_within(const outcome& o, milliseconds bound) {
  INFO("the acquire: " << describe(o));
  CHECK(o.how == outcome::granted);
  CHECK(o.took <= bound);
}

// One test's view of the partition set and the backend under test.
class scenario {
 public:
  const partition::backend_case& backend = partition::backend();
  const partition::bounds& promised = backend.promised;
  support::partition_servers set;
  std::string scope = support::unique_name("partition");

  std::shared_ptr<dlock::provider> provider(net_path path) {
    return dlock::make_provider(backend.url(set.url(backend.variable, path), scope));
  }

  // Cuts path A to every server of the backend: the client on A is on its own.
  std::unique_ptr<support::partition_cut> cut_off() {
    return std::make_unique<support::partition_cut>(set, backend.servers, net_path::a);
  }

  // A holder of `name` on path B, for a waiter on path A to queue behind: its provider (which
  // must outlive the handle's release) and its handle.
  std::pair<std::shared_ptr<dlock::provider>, dlock::lock_handle> hold_on_b(
      const std::string& name) {
    auto holder = provider(net_path::b);
    auto held = holder->create_lock(name).acquire(10s);
    return {std::move(holder), std::move(held)};
  }

  // A waiter's own timeout: it ends a waiter that never notices the cut, so that a hang shows as
  // timeout_error (or "not obtained") rather than as a hung test.
  milliseconds waiter_timeout() const { return 2 * promised.waiter_fails + 1s; }

  // Once `waiter` waits at the server (behind a holder on path B), cuts it off; returns the
  // cut and when it began.
  std::pair<std::unique_ptr<support::partition_cut>, clock_type::time_point> cut_off_waiting(
      const dlock::provider& waiter) {
    REQUIRE(support::wait_until([&] { return waiter.metrics().waits >= 1; }, 10s));
    auto cut = cut_off();
    return {std::move(cut), clock_type::now()};
  }

  // Prints a figure for the docs, named after the backend.
  void report(const std::string& what, milliseconds took) const {
    WARN(backend.name << ": " << what << ": " << took.count() << " ms");
  }
};

// The moment a handle is marked lost, from its on_lost callback (the monitor's own clock
// reading, not when a poll noticed).
class lost_moment {
 public:
  explicit lost_moment(dlock::lock_handle& handle) {
    handle.on_lost([this] { at_.store(clock_type::now().time_since_epoch().count()); });
  }
  bool known() const { return at_.load() != 0; }
  clock_type::time_point at() const {
    return clock_type::time_point(clock_type::duration(at_.load()));
  }

 private:
  std::atomic<clock_type::rep> at_{0};
};

}  // namespace

TEST_CASE("a holder cut off is marked lost within its bound and nobody else is granted before",
          "[partition][deployment][holder]") {
  scenario s;
  auto holder = s.provider(net_path::a);
  auto contender = s.provider(net_path::b);
  const std::string name = "held";
  auto held = holder->create_lock(name).acquire(10s);
  const std::uint64_t holder_token = held.fencing_token();
  lost_moment marked(held);
  CHECK(holder->health().ok());

  auto cut = s.cut_off();
  const auto cut_at = clock_type::now();
  const milliseconds contender_wait = deadline(s.promised.lost + s.promised.granted_after);
  auto contending = std::async(std::launch::async, [&] {
    return run_acquire(
        [&] { return contender->create_lock(name).try_acquire(contender_wait); }, cut_at);
  });
  const bool lost = support::wait_until([&] { return held.lost(); }, deadline(s.promised.lost));
  const milliseconds lost_after = since(cut_at);
  // A liveness check sees the cut no later than the holder does.
  const auto health = holder->health();
  INFO(s.backend.name << ": health after the loss: " << describe(health));
  CHECK_FALSE(health.ok());
  const outcome contended = contending.get();
  cut->heal();

  s.report("holder marked lost after the cut", lost_after);
  WARN(s.backend.name << ": contender on the other path: " << describe(contended));
  CHECK(lost);
  CHECK(lost_after <= s.promised.lost);
  REQUIRE(contended.how == outcome::granted);
  CHECK(contended.took <= s.promised.lost + s.promised.granted_after);
  // Nobody is granted before the holder knows it lost the lock, and never with a lower token.
  REQUIRE(marked.known());
  CHECK(contended.ended >= marked.at());
  CHECK(contended.handle->fencing_token() > holder_token);

  // Healthy again once the path is back and the lost handle is let go.
  try {
    held.release();
  } catch (const dlock::error&) {
  }
  CHECK(support::wait_until([&] { return holder->health().ok(); },
                            deadline(s.promised.lost + s.promised.granted_after)));
}

TEST_CASE("a waiter cut off fails with connection_error within its bound, sync and async",
          "[partition][deployment][waiter]") {
  scenario s;
  const std::string name = "waited-for";
  auto [holder, held] = s.hold_on_b(name);
  auto waiter = s.provider(net_path::a);
  const milliseconds waiter_timeout = s.waiter_timeout();
  const bool async = GENERATE(false, true);
  INFO((async ? "async_acquire" : "acquire"));

  std::future<outcome> waiting;
  std::stop_source stop;
  if (async) {
    auto future = waiter->create_lock(name).async_acquire(waiter_timeout, stop.get_token(),
                                                           boost::asio::use_future);
    waiting = std::async(std::launch::async, [future = std::move(future)]() mutable {
      return run_acquire([&] { return std::optional(future.get()); }, clock_type::now());
    });
  } else {
    waiting = std::async(std::launch::async, [&] {
      return run_acquire(
          [&] {
            return std::optional(
                waiter->create_lock(name).acquire(waiter_timeout, stop.get_token()));
          },
          clock_type::now());
    });
  }
  auto [cut, cut_at] = s.cut_off_waiting(*waiter);
  // A waiter that outlives every bound is stopped, so the case ends either way.
  if (waiting.wait_for(waiter_timeout + 10s) != std::future_status::ready) stop.request_stop();
  outcome waited = waiting.get();
  waited.measure_from(cut_at);
  cut->heal();

  WARN(s.backend.name << ": " << (async ? "async " : "") << "waiter cut off: "
                      << describe(waited));
  CHECK(waited.how == outcome::connection_error);
  CHECK(waited.took <= s.promised.waiter_fails);
}

TEST_CASE("a stop request ends a wait within 100 ms while its servers are silent, sync and async",
          "[partition][stop]") {
  scenario s;
  constexpr int waits = 5;
  const bool async = GENERATE(false, true);
  INFO((async ? "async_acquire" : "acquire"));
  auto waiter = s.provider(net_path::a);
  auto contender = s.provider(net_path::b);
  std::vector<std::pair<std::shared_ptr<dlock::provider>, dlock::lock_handle>> held;
  std::vector<std::stop_source> stops(waits);
  std::vector<std::future<outcome>> waiting;
  for (int i = 0; i < waits; ++i) {
    const std::string name = "stopped-" + std::to_string(i);
    held.push_back(s.hold_on_b(name));
    const auto stop = stops[i].get_token();
    if (async) {
      auto future = waiter->create_lock(name).async_acquire(s.waiter_timeout(), stop,
                                                             boost::asio::use_future);
      waiting.push_back(std::async(std::launch::async, [future = std::move(future)]() mutable {
        return run_acquire([&] { return std::optional(future.get()); }, clock_type::now());
      }));
    } else {
      waiting.push_back(std::async(std::launch::async, [&s, &waiter, name, stop] {
        return run_acquire(
            [&] { return std::optional(waiter->create_lock(name).acquire(s.waiter_timeout(), stop)); },
            clock_type::now());
      }));
    }
  }
  REQUIRE(support::wait_until([&] { return waiter->metrics().waits == waits; }, 10s));
  auto cut = s.cut_off();
  // One stop at a time, each measured on its own: nothing the server would say can help. A
  // stop during which the process lost half the bound of running time is the machine's delay.
  std::vector<outcome> stopped;
  std::vector<milliseconds> took;  // the stops the machine did not stall
  support::stall_watch stalls;
  for (int i = 0; i < waits; ++i) {
    stalls.reset();
    const auto stopped_at = clock_type::now();
    stops[i].request_stop();
    stopped.push_back(waiting[i].get());
    stopped.back().measure_from(stopped_at);
    if (!stalls.stalled(support::latency_bound(100ms) / 2)) took.push_back(stopped.back().took);
  }
  cut->heal();
  // What the stopped waits left at the server does not keep the names from others for long.
  for (auto& [provider, handle] : held) handle.release();
  std::vector<outcome> after_heal;
  for (int i = 0; i < waits; ++i) {
    after_heal.push_back(run_acquire(
        [&] {
          return contender->create_lock("stopped-" + std::to_string(i))
              .try_acquire(deadline(s.promised.granted_after));
        },
        clock_type::now()));
  }

  for (const outcome& o : stopped) {
    INFO("a stopped wait: " << describe(o));
    CHECK(o.how == outcome::cancelled);
  }
  std::sort(took.begin(), took.end());
  INFO(waits - took.size() << " of " << waits << " stops not measured: the machine stalled");
  REQUIRE(took.size() >= 2);
  s.report(std::string(async ? "async " : "") + "waits stopped while cut off, the slowest",
           took.back());
  // One stop delayed by a loaded machine is not the backend waiting for its server. The bound
  // is held where latency is (support/timing.hpp); a sanitized run checks the outcome.
  CHECK(took[took.size() - 2] < support::latency_bound(100ms));
  for (const outcome& o : after_heal) check_granted_within(o, s.promised.granted_after);
}

TEST_CASE("a grant whose waiter was cut off does not block the name after the heal",
          "[partition][reply-lost]") {
  scenario s;
  const std::string name = "granted-to-nobody";
  auto [holder, held] = s.hold_on_b(name);
  auto contender = s.provider(net_path::b);
  // The waiter provider lives on through the heal: what it left must not need it to die.
  auto waiter = s.provider(net_path::a);
  auto waiting = std::async(std::launch::async, [&] {
    return run_acquire(
        [&] { return waiter->create_lock(name).try_acquire(s.waiter_timeout()); },
        clock_type::now());
  });
  auto [cut, cut_at] = s.cut_off_waiting(*waiter);
  // The server now grants the name to the waiter, whose answer is lost on the cut path.
  held.release();
  outcome waited = waiting.get();
  waited.measure_from(cut_at);
  cut->heal();
  const auto healed_at = clock_type::now();
  const outcome contended = run_acquire(
      [&] { return contender->create_lock(name).try_acquire(deadline(s.promised.granted_after)); },
      healed_at);

  WARN(s.backend.name << ": waiter granted while cut off: " << describe(waited));
  WARN(s.backend.name << ": contender after the heal: " << describe(contended));
  CHECK(waited.how != outcome::not_obtained);
  check_granted_within(contended, s.promised.granted_after);
}

TEST_CASE("the same provider works again after a partition shorter than its bound",
          "[partition][heal]") {
  scenario s;
  auto client = s.provider(net_path::a);
  auto held = client->create_lock("kept").acquire(10s);
  {
    auto cut = s.cut_off();
    // The partition lasts a third of the bound; it ends early only if the handle is lost.
    support::wait_until([&] { return held.lost(); }, s.promised.lost / 3);
  }
  const auto healed_at = clock_type::now();
  const outcome fresh = run_acquire(
      [&] { return client->create_lock("fresh").try_acquire(deadline(s.promised.granted_after)); },
      healed_at);
  const bool lost = held.lost();
  bool released = true;
  if (!lost) {
    try {
      held.release();
    } catch (const dlock::error&) {
      released = false;
    }
  }
  WARN(s.backend.name << ": after a short partition: held handle " << (lost ? "lost" : "kept")
                      << "; a new acquire on the same provider: " << describe(fresh));
  check_granted_within(fresh, s.promised.granted_after);
  CHECK(released);
}

TEST_CASE("the same provider works again after a partition longer than its bound",
          "[partition][heal]") {
  scenario s;
  auto client = s.provider(net_path::a);
  const std::string name = "outlasted";
  auto held = client->create_lock(name).acquire(10s);
  auto cut = s.cut_off();
  const auto cut_at = clock_type::now();
  const bool lost = support::wait_until([&] { return held.lost(); }, deadline(s.promised.lost));
  s.report("holder marked lost (heal after the bound)", since(cut_at));
  cut->heal();
  const auto healed_at = clock_type::now();
  try {
    held.release();  // a lost handle's release may fail; the lock must come free regardless
  } catch (const dlock::error&) {
  }
  const outcome again = run_acquire(
      [&] { return client->create_lock(name).try_acquire(deadline(s.promised.granted_after)); },
      healed_at);
  WARN(s.backend.name << ": the same name on the same provider after the heal: "
                      << describe(again));
  CHECK(lost);
  check_granted_within(again, s.promised.granted_after);
}

TEST_CASE("a provider holding many locks cut off has every handle marked lost within its bound",
          "[partition][deployment][holder]") {
  scenario s;
  auto client = s.provider(net_path::a);
  std::vector<dlock::lock_handle> held;
  for (int i = 0; i < 20; ++i) {
    held.push_back(client->create_lock("many-" + std::to_string(i)).acquire(10s));
  }
  auto cut = s.cut_off();
  const auto cut_at = clock_type::now();
  const bool all_lost = support::wait_until(
      [&] {
        return std::all_of(held.begin(), held.end(), [](const auto& h) { return h.lost(); });
      },
      deadline(s.promised.lost));
  const milliseconds took = since(cut_at);
  const auto still_held =
      std::count_if(held.begin(), held.end(), [](const auto& h) { return !h.lost(); });
  cut->heal();
  s.report("20 handles all marked lost", took);
  CHECK(all_lost);
  CHECK(still_held == 0);
  CHECK(took <= s.promised.lost);
}

TEST_CASE("with one member cut off, grants on the rest stay quick", "[partition][member]") {
  scenario s;
  auto client = s.provider(net_path::a);
  // Warm up: the connections (or session) exist before any member goes silent.
  client->create_lock("warm-up").acquire(10s).release();
  milliseconds slowest{};
  int granted = 0;
  // Each member in turn, so that the member a ZooKeeper session is on is cut once too.
  for (const auto& member : s.backend.servers) {
    support::partition_cut cut(s.set, {member}, net_path::a);
    for (int i = 0; i < 2; ++i) {
      const auto start = clock_type::now();
      outcome got = run_acquire(
          [&] {
            return client->create_lock("member-" + member + "-" + std::to_string(i))
                .try_acquire(deadline(s.promised.grant_with_member_cut));
          },
          start);
      if (got.how == outcome::granted) {
        ++granted;
        const auto released = clock_type::now();
        try {
          got.handle->release();
        } catch (const dlock::error&) {
        }
        s.report(member + " cut: grant " + std::to_string(i) + " (" + describe(got) +
                     "), release",
                 since(released));
      } else {
        WARN(s.backend.name << ": " << member << " cut: grant " << i << ": " << describe(got));
      }
      slowest = std::max(slowest, got.took);
    }
  }
  s.report("slowest grant with one member cut", slowest);
  CHECK(granted == static_cast<int>(2 * s.backend.servers.size()));
  CHECK(slowest <= s.promised.grant_with_member_cut);
}
