// Leader election under a partition, for every backend of the scenarios that has elections
// (docs/election.md; tests/partition/CMakeLists.txt leaves the others out): the lead is the
// election's lock, so a leader cut off loses the lead within the lock's bound, and the other side
// elects a leader with a higher term only after.
#include <catch2/catch.hpp>

#include <atomic>

#include <dlock/dlock.hpp>

#include "scenario.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using support::net_path;

TEST_CASE("a leader cut off loses the lead within its bound and the other side elects a higher "
          "term after it",
          "[partition][election]") {
  const partition::backend_case& backend = partition::backend();
  support::partition_servers set;
  const std::string scope = support::unique_name("partition-election");
  auto on_a = dlock::make_provider(backend.url(set.url(backend.variable, net_path::a), scope));
  auto on_b = dlock::make_provider(backend.url(set.url(backend.variable, net_path::b), scope));
  // CMake runs this case only for the backends with elections: here a throw is a failure.
  dlock::election cut_side = on_a->create_election("elected");
  dlock::election other_side = on_b->create_election("elected");
  dlock::leadership lead = cut_side.campaign("cut off", 10s);
  const std::uint64_t term = lead.term();
  CHECK(other_side.leader() == dlock::leader_info{"cut off", term});
  std::atomic<bool> told_lost{false};
  lead.on_lost([&] { told_lost = true; });

  const auto bound = backend.promised.lost + backend.promised.granted_after;
  const auto cut_at = std::chrono::steady_clock::now();
  {
    support::partition_cut cut(set, backend.servers, net_path::a);
    dlock::leadership next = other_side.campaign("successor", bound + bound / 2 + 2s);
    const auto elected_at = std::chrono::steady_clock::now();
    WARN(backend.name << ": the other side elected after the cut: "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(elected_at - cut_at)
                             .count()
                      << " ms");
    CHECK(elected_at - cut_at <= bound);
    CHECK(next.term() > term);
    // Nobody leads before the cut-off leader knows it lost the lead: its lost() says so by the
    // clock from the end of its grant's validity, which comes before its keys can expire. The
    // on_lost callback comes at that time too, or when a starved clock thread gets to run it.
    CHECK(lead.lost());
    REQUIRE(support::wait_until([&] { return told_lost.load(); }, 10s));
    CHECK(other_side.leader() == dlock::leader_info{"successor", next.term()});
    cut.heal();
    // The deposed leader can neither proclaim nor, resigning, remove the successor's record.
    CHECK_THROWS_AS(lead.proclaim("stale"), dlock::lock_lost_error);
    try {
      lead.resign();
    } catch (const dlock::error&) {
    }
    CHECK(other_side.leader() == dlock::leader_info{"successor", next.term()});
  }
}

TEST_CASE("with one member cut off, an election on the rest goes on within a grant's bound",
          "[partition][member][election]") {
  const partition::backend_case& backend = partition::backend();
  support::partition_servers set;
  const std::string scope = support::unique_name("partition-election-member");
  auto client = dlock::make_provider(backend.url(set.url(backend.variable, net_path::a), scope));
  dlock::election election = client->create_election("elected");
  const auto bound = backend.promised.grant_with_member_cut;
  // Warm up: the connections (or session) exist before any member goes silent.
  election.campaign("warm-up", 10s).resign();
  // Every step of a term, timed: each may wait for the quorum, never for the silent member.
  std::chrono::steady_clock::duration slowest{};
  const auto timed = [&](auto step) {
    const auto start = std::chrono::steady_clock::now();
    step();
    slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
  };
  for (const auto& member : backend.servers) {
    support::partition_cut cut(set, {member}, net_path::a);
    std::optional<dlock::leadership> lead;
    timed([&] { lead.emplace(election.campaign(member, bound)); });
    timed([&] { lead->proclaim(member + " proclaimed"); });
    timed([&] { CHECK(election.leader() == dlock::leader_info{member + " proclaimed", lead->term()}); });
    timed([&] { lead->resign(); });
    timed([&] { CHECK(election.leader() == std::nullopt); });
  }
  WARN(backend.name << ": slowest election step with one member cut: "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count()
                    << " ms");
  CHECK(slowest <= bound);
}
