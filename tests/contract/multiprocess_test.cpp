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
  std::vector<std::unique_ptr<child_process>> children;
  for (int i = 0; i < processes; ++i) {
    children.push_back(std::make_unique<child_process>(std::vector<std::string>{
        support::helper_path(), "contend", backend().url(), name, std::to_string(iterations),
        log}));
  }
  for (auto& child : children) {
    auto status = child->wait(120s);
    REQUIRE(status);
    REQUIRE(support::exit_code(*status) == 0);
  }
  std::ifstream in(log);
  std::string kind, token, pid;
  std::string open_pid;
  std::uint64_t previous = 0;
  int sections = 0;
  while (in >> kind >> token >> pid) {
    INFO("section " << sections << ": " << kind << " " << token << " " << pid);
    if (kind == "B") {
      REQUIRE(open_pid.empty());  // nobody else is inside
      REQUIRE(std::stoull(token) > previous);
      previous = std::stoull(token);
      open_pid = pid;
    } else {
      REQUIRE(open_pid == pid);
      open_pid.clear();
      ++sections;
    }
  }
  CHECK(sections == processes * iterations);
}
