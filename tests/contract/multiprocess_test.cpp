// Several processes on one backend: exclusion, fencing, and a holder that crashes.
#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>
#include <fstream>
#include <sstream>

#include "backend.hpp"
#include "min_hold_support.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::child_process;
using support::unique_name;
using support::wait_until;

TEST_CASE("a holder killed with SIGKILL frees the lock for others",
          "[contract][deployment][multiprocess][fault]") {
  const auto name = unique_name("killed");
  child_process holder({support::helper_path(), "hold", backend().url(), name, "lock"});
  auto line = holder.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("acquired ", 0) == 0);
  auto provider = backend().make_provider();
  CHECK_FALSE(provider->create_lock(name).try_acquire());
  holder.signal(SIGKILL);
  REQUIRE(holder.wait());
  // Backends with leases free it when the lease or session expires: wait that long.
  CHECK(provider->create_lock(name).try_acquire(60s));
}

TEST_CASE("a holder killed with SIGKILL before its minimum hold ended keeps the lock until "
          "grant + min_hold",
          "[contract][multiprocess][fault][min_hold]") {
  auto provider = backend().make_provider();
  if (!contract::keeps_min_hold(*provider)) {
    DLOCK_SKIP(backend().label() << " refuses minimum holds");
  }
  const auto name = unique_name("killed-min-hold");
  const auto asked = std::chrono::steady_clock::now();
  child_process holder({support::helper_path(), "hold",
                        contract::with_url_option(backend().url(), "min_hold=2s"), name, "lock"});
  auto line = holder.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("acquired ", 0) == 0);
  holder.signal(SIGKILL);
  REQUIRE(holder.wait());
  if (std::chrono::steady_clock::now() - asked < contract::min_hold / 2) {
    CHECK_FALSE(provider->create_lock(name).try_acquire());
  }
  auto next = provider->create_lock(name).acquire(60s);
  CHECK(std::chrono::steady_clock::now() - asked >= contract::min_hold - contract::clock_slack);
  CHECK(next.fencing_token() > std::stoull(line->substr(9)));
}

TEST_CASE("processes contending for one lock never overlap and see increasing tokens",
          "[contract][deployment][multiprocess][exclusion]") {
  const auto name = unique_name("processes");
  support::temp_directory logs;
  const auto log = (logs.path() / "sections.log").string();
  constexpr int processes = 4;
  constexpr int iterations = 50;
  support::run_contenders(backend().url(), name, processes, iterations, log);
  CHECK(support::count_exclusive_sections(log) == processes * iterations);
}

TEST_CASE("processes taking a write lock by upgrading and directly never overlap and see "
          "increasing tokens",
          "[contract][multiprocess][upgradeable]") {
  const auto name = unique_name("upgrading-processes");
  support::temp_directory logs;
  const auto log = (logs.path() / "sections.log").string();
  constexpr int processes = 3;
  constexpr int iterations = 20;
  std::vector<std::unique_ptr<child_process>> children;
  for (int i = 0; i < processes; ++i) {
    children.push_back(std::make_unique<child_process>(
        std::vector<std::string>{support::helper_path(), "contend-upgrade", backend().url(), name,
                                 std::to_string(iterations), log}));
  }
  for (auto& child : children) {
    const auto status = child->wait(2min);
    REQUIRE(status);
    CHECK(support::exit_code(*status) == 0);
  }
  CHECK(support::count_exclusive_sections(log) == processes * iterations);
}

TEST_CASE("processes listing the same two locks in opposite orders never deadlock",
          "[contract][multiprocess][acquire_all]") {
  const auto a = unique_name("cross-a");
  const auto b = unique_name("cross-b");
  support::temp_directory logs;
  const auto log = (logs.path() / "sections.log").string();
  constexpr int iterations = 100;
  child_process forwards({support::helper_path(), "contend-all", backend().url(), a, b,
                          std::to_string(iterations), log});
  child_process backwards({support::helper_path(), "contend-all", backend().url(), b, a,
                           std::to_string(iterations), log});
  for (auto* child : {&forwards, &backwards}) {
    const auto status = child->wait(180s);
    REQUIRE(status);
    CHECK(support::exit_code(*status) == 0);
  }
  // Each section held both locks, so no two may overlap.
  CHECK(support::count_exclusive_sections(log) == 2 * iterations);
}
