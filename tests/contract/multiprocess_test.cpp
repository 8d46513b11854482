// Several processes on one backend: exclusion, fencing, and a holder that crashes.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::child_process;
using support::unique_name;
using support::wait_until;

TEST_CASE("a holder killed with SIGKILL frees the lock for others",
          "[contract][multiprocess][fault]") {
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

TEST_CASE("processes contending for one lock never overlap and see increasing tokens",
          "[contract][multiprocess][exclusion]") {
  const auto name = unique_name("processes");
  support::temp_directory logs;
  const auto log = (logs.path() / "sections.log").string();
  constexpr int processes = 4;
  constexpr int iterations = 50;
  support::run_contenders(backend().url(), name, processes, iterations, log);
  CHECK(support::count_exclusive_sections(log) == processes * iterations);
}
