// Leader election, stated once for every backend with an election board.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

// What an observer saw, in order; the callback runs on the observation's thread.
class seen_leaders {
 public:
  void add(const std::optional<dlock::leader_info>& leader) {
    std::lock_guard lock(mutex_);
    seen_.push_back(leader);
  }
  std::vector<std::optional<dlock::leader_info>> all() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }
  bool last_is(const std::optional<dlock::leader_info>& expected) const {
    std::lock_guard lock(mutex_);
    return !seen_.empty() && seen_.back() == expected;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::optional<dlock::leader_info>> seen_;
};

}  // namespace

TEST_CASE("an election is created by name and a bad name is refused",
          "[contract][election]") {
  auto provider = backend().make_provider();
  dlock::election e = provider->create_election(unique_name("named"));
  CHECK(e.value().find(":" + std::to_string(::getpid())) != std::string::npos);
  CHECK_THROWS_AS(provider->create_election(""), std::invalid_argument);
  CHECK_THROWS_AS(e.try_campaign(-1s), std::invalid_argument);
}

TEST_CASE("the leader is recorded with its value and term, and nobody once it resigns",
          "[contract][election]") {
  auto provider = backend().make_provider();
  dlock::election e = provider->create_election(unique_name("recorded"));
  CHECK_FALSE(e.leader());
  dlock::leadership lead = e.campaign("node-a", 10s);
  REQUIRE(lead);
  CHECK_FALSE(lead.lost());
  CHECK(lead.value() == "node-a");
  CHECK(e.leader() == dlock::leader_info{"node-a", lead.term()});
  lead.resign();
  CHECK_FALSE(lead);
  CHECK_FALSE(e.leader());
  lead.resign();  // idempotent
}

TEST_CASE("an election and the lock of the same name do not block each other",
          "[contract][election]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("apart");
  dlock::lock_handle lock = provider->create_lock(name).acquire(10s);
  auto lead = provider->create_election(name).try_campaign();
  REQUIRE(lead);
  CHECK(provider->create_election(name).leader());
}

TEST_CASE("while one candidate leads another is not elected, and resigning lets it in with a "
          "higher term",
          "[contract][deployment][election]") {
  auto first = backend().make_provider();
  auto second = backend().make_provider();
  const auto name = unique_name("handover");
  dlock::leadership lead = first->create_election(name).campaign("first", 10s);
  dlock::election other = second->create_election(name);
  CHECK_FALSE(other.try_campaign("second"));
  CHECK_THROWS_AS(other.campaign("second", 50ms), dlock::timeout_error);
  auto waiting = std::async(std::launch::async, [&] { return other.campaign("second", 30s); });
  const std::uint64_t first_term = lead.term();
  lead.resign();
  dlock::leadership next = waiting.get();
  CHECK(next.term() > first_term);
  CHECK(other.leader() == dlock::leader_info{"second", next.term()});
}

TEST_CASE("candidates on many threads lead one at a time, each term higher than the last",
          "[contract][election]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("threads");
  constexpr int threads = 4;
  constexpr int terms_each = 15;
  std::atomic<int> leading{0};
  std::atomic<int> overlaps{0};
  std::mutex terms_mutex;
  std::vector<std::uint64_t> terms;
  std::atomic<int> failures{0};
  std::vector<std::thread> candidates;
  for (int t = 0; t < threads; ++t) {
    candidates.emplace_back([&, t] {
      try {
        auto own = backend().make_provider();
        dlock::election e = own->create_election(name);
        for (int i = 0; i < terms_each; ++i) {
          dlock::leadership lead = e.campaign("thread-" + std::to_string(t), 60s);
          if (leading.fetch_add(1) != 0) ++overlaps;
          {
            std::lock_guard lock(terms_mutex);
            terms.push_back(lead.term());
          }
          leading.fetch_sub(1);
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& c : candidates) c.join();
  CHECK(failures == 0);
  CHECK(overlaps == 0);
  REQUIRE(terms.size() == threads * terms_each);
  for (std::size_t i = 1; i < terms.size(); ++i) CHECK(terms[i] > terms[i - 1]);
}

TEST_CASE("proclaim replaces the value while leading and is refused once the lead is lost",
          "[contract][election]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("proclaim");
  dlock::election e = provider->create_election(name);
  dlock::leadership lead = e.campaign("before", 10s);
  lead.proclaim("after");
  CHECK(lead.value() == "after");
  CHECK(e.leader() == dlock::leader_info{"after", lead.term()});
  backend().break_election(name);
  REQUIRE(wait_until([&] { return lead.lost(); }, 30s));
  CHECK(lead.lost_token().stop_requested());
  CHECK_THROWS_AS(lead.proclaim("stale"), dlock::lock_lost_error);
  REQUIRE(wait_until([&] { return !e.leader(); }, 30s));
  dlock::leadership next = e.campaign("next", 30s);
  CHECK(next.term() > lead.term());
  CHECK_THROWS_AS(lead.proclaim("stale"), dlock::lock_lost_error);
  CHECK(e.leader() == dlock::leader_info{"next", next.term()});
  // The lost lead's resignation leaves the new leader's record alone.
  lead = dlock::leadership();
  CHECK(e.leader() == dlock::leader_info{"next", next.term()});
}

TEST_CASE("a stop request ends a campaign promptly and leaves nothing behind",
          "[contract][election][cancel]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("stopped");
  dlock::election e = provider->create_election(name);
  dlock::leadership lead = e.campaign("holder", 10s);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    auto other = backend().make_provider();
    return other->create_election(name).try_campaign("stopped", 60s, stop.get_token());
  });
  // The candidate may or may not be waiting yet; either way the stop ends it.
  stop.request_stop();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(waiting.get());
  lead.resign();
  // No orphaned candidate took the lead: a fresh one gets it at once.
  auto next = backend().make_provider()->create_election(name).try_campaign("next");
  REQUIRE(next);
  CHECK(e.leader() == dlock::leader_info{"next", next->term()});
}

TEST_CASE("async_campaign completes once the leader resigns, and async_try_campaign with "
          "nothing when it times out",
          "[contract][election][async]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("async");
  dlock::election e = provider->create_election(name);
  dlock::leadership lead = e.campaign(10s);
  auto timed_out = e.async_try_campaign(20ms, {}, boost::asio::use_future);
  REQUIRE(timed_out.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(timed_out.get());
  auto next = e.with_value("async").async_campaign(30s, {}, boost::asio::use_future);
  lead.resign();
  REQUIRE(next.wait_for(30s) == std::future_status::ready);
  dlock::leadership got = next.get();
  CHECK(e.leader() == dlock::leader_info{"async", got.term()});
}

TEST_CASE("an observer sees every change of leader in order",
          "[contract][deployment][election][observe]") {
  auto provider = backend().make_provider();
  const auto name = unique_name("observed");
  dlock::election e = provider->create_election(name);
  seen_leaders seen;
  dlock::leader_observation observation =
      backend().make_provider()->create_election(name).observe(
          [&](const std::optional<dlock::leader_info>& leader) { seen.add(leader); });
  REQUIRE(wait_until([&] { return seen.last_is(std::nullopt); }, 10s));
  std::vector<std::optional<dlock::leader_info>> expected{std::nullopt};
  for (int i = 0; i < 3; ++i) {
    const std::string value = "leader-" + std::to_string(i);
    dlock::leadership lead = e.campaign(value, 10s);
    expected.push_back(dlock::leader_info{value, lead.term()});
    REQUIRE(wait_until([&] { return seen.last_is(expected.back()); }, 10s));
    lead.proclaim(value + "-again");
    expected.push_back(dlock::leader_info{value + "-again", lead.term()});
    REQUIRE(wait_until([&] { return seen.last_is(expected.back()); }, 10s));
    lead.resign();
    expected.push_back(std::nullopt);
    REQUIRE(wait_until([&] { return seen.last_is(std::nullopt); }, 10s));
  }
  observation.stop();
  CHECK(seen.all() == expected);
}

TEST_CASE("an observation may be stopped from its own callback", "[contract][election][observe]") {
  auto provider = backend().make_provider();
  dlock::election e = provider->create_election(unique_name("self-stopped"));
  std::atomic<int> calls{0};
  std::atomic<bool> stopped{false};
  dlock::leader_observation observation;
  std::mutex observation_mutex;
  std::unique_lock hold(observation_mutex);
  observation = e.observe([&](const std::optional<dlock::leader_info>&) {
    if (calls++ > 0) return;
    {
      std::lock_guard lock(observation_mutex);
      observation.stop();
    }
    stopped = true;  // the last thing the callback touches: the test may end after it
  });
  hold.unlock();
  REQUIRE(wait_until([&] { return stopped.load(); }, 10s));
  dlock::leadership lead = e.campaign(10s);
  CHECK(calls == 1);
}

TEST_CASE("a provider dropped as soon as use_future delivers a campaign shuts down cleanly",
          "[contract][election][async]") {
  // The completion must hold no reference to the provider once it is delivered: else the
  // provider's own thread tears it down, and that thread outlives the caller's teardown.
  for (int round = 0; round < 20; ++round) {
    const auto name = unique_name("async-teardown");
    auto provider = backend().make_provider();
    auto lead = provider->create_election(name).async_campaign(10s, {}, boost::asio::use_future);
    CHECK(lead.get().term() > 0);
    provider.reset();
    auto missed = backend().make_provider()->create_election(name).async_try_campaign(
        0s, {}, boost::asio::use_future);
    CHECK(missed.get());
  }
}
