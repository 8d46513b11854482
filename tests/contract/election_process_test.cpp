// Leader election across processes, for every backend with elections that other processes
// reach.
#include <signal.h>

#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::child_process;
using support::unique_name;
using support::wait_until;

TEST_CASE("candidates in several processes lead one at a time, each term higher than the last",
          "[contract][election][multiprocess]") {
  const auto name = unique_name("election-processes");
  support::temp_directory logs;
  const auto log = (logs.path() / "terms.log").string();
  constexpr int processes = 3;
  constexpr int terms_each = 20;
  std::vector<std::unique_ptr<child_process>> candidates;
  for (int i = 0; i < processes; ++i) {
    candidates.push_back(std::make_unique<child_process>(
        std::vector<std::string>{support::helper_path(), "contend-election", backend().url(),
                                 name, std::to_string(terms_each), log}));
  }
  for (auto& candidate : candidates) {
    const auto status = candidate->wait(2min);
    REQUIRE(status);
    CHECK(support::exit_code(*status) == 0);
  }
  CHECK(support::count_exclusive_sections(log) == processes * terms_each);
}

TEST_CASE("a leader killed with SIGKILL stops being reported and another is elected with a "
          "higher term",
          "[contract][deployment][election][multiprocess][fault]") {
  const auto name = unique_name("killed-leader");
  child_process leader({support::helper_path(), "lead", backend().url(), name, "doomed"});
  const auto line = leader.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("leading ", 0) == 0);
  const std::uint64_t term = std::stoull(line->substr(8));
  auto provider = backend().make_provider();
  dlock::election e = provider->create_election(name);
  CHECK(e.leader() == dlock::leader_info{"doomed", term});
  CHECK_FALSE(e.try_campaign("successor"));
  leader.signal(SIGKILL);
  REQUIRE(leader.wait());
  // Backends with leases end the lead when the lease or session expires: wait that long. A read
  // that times out on a loaded ensemble (a connection_error) is asked again: this case is
  // about the lead ending, and the campaign below must still read the board.
  CHECK(wait_until(
      [&] {
        try {
          return !e.leader();
        } catch (const dlock::connection_error&) {
          return false;
        }
      },
      60s));
  dlock::leadership next = e.campaign("successor", 60s);
  CHECK(next.term() > term);
  CHECK(e.leader() == dlock::leader_info{"successor", next.term()});
}

TEST_CASE("a leader in another process that resigns lets a waiting candidate in",
          "[contract][election][multiprocess]") {
  const auto name = unique_name("resigning-leader");
  child_process leader({support::helper_path(), "lead", backend().url(), name, "first"});
  const auto line = leader.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("leading ", 0) == 0);
  auto provider = backend().make_provider();
  dlock::election e = provider->create_election(name);
  auto next = std::async(std::launch::async, [&] { return e.campaign(60s); });
  leader.close_stdin();
  CHECK(leader.read_line(30s) == std::optional<std::string>("resigned"));
  REQUIRE(next.wait_for(60s) == std::future_status::ready);
  CHECK(next.get().term() > std::stoull(line->substr(8)));
}
