// The nemesis checker must catch what a broken lock does: each case is a history that a correct
// lock could not produce (or could), written by hand.
#include <catch2/catch.hpp>

#include "history.hpp"
#include "support.hpp"

using support::check_fenced_mutex;
using support::check_semaphore;
using support::history;
using support::section;

namespace {

section held(pid_t pid, std::uint64_t token, std::int64_t begin, std::int64_t end,
             std::int64_t read) {
  return {.pid = pid, .token = token, .begin = begin, .end = end, .read = read,
          .write_accepted = true};
}

}  // namespace

TEST_CASE("the checker accepts one holder after another with rising tokens", "[core][checker]") {
  history h{.sections = {held(1, 10, 0, 5, 0), held(2, 11, 6, 9, 1), held(1, 12, 10, 12, 2)}};
  const auto v = check_fenced_mutex(h);
  CHECK(v.violations.empty());
  CHECK(v.sections == 3);
  CHECK(v.accepted_writes == 3);
  CHECK(v.overlaps == 0);
}

TEST_CASE("the checker finds two holders at once", "[core][checker]") {
  history h{.sections = {held(1, 10, 0, 5, 0), held(2, 11, 4, 9, 1)}};
  const auto v = check_fenced_mutex(h);
  REQUIRE(v.violations.size() == 1);
  CHECK_THAT(v.violations[0], Catch::Contains("two holders at once"));
}

TEST_CASE("the checker excuses an overlap whose earlier holder was paused, and checks its token",
          "[core][checker]") {
  // pid 1 paused inside its section; pid 2 was granted meanwhile (lease expired), and the
  // fenced store refused pid 1's late write.
  section stale = held(1, 10, 0, 50, 0);
  stale.write_accepted = false;
  history h{.sections = {stale, held(2, 11, 20, 30, 0)},
            .faults = {{.pid = 1, .from = 5, .to = 40}}};
  const auto v = check_fenced_mutex(h);
  CHECK(v.violations.empty());
  CHECK(v.excused_overlaps == 1);
}

TEST_CASE("the checker finds a token granted twice and a token going back",
          "[core][checker]") {
  SECTION("a token granted twice") {
    history h{.sections = {held(1, 10, 0, 5, 0), held(2, 10, 6, 9, 1)}};
    CHECK_THAT(check_fenced_mutex(h).violations.at(0), Catch::Contains("granted twice"));
  }
  SECTION("a later section with a lower token") {
    history h{.sections = {held(1, 10, 0, 5, 0), held(2, 9, 6, 9, 1)}};
    const auto v = check_fenced_mutex(h);
    REQUIRE_FALSE(v.violations.empty());
    CHECK_THAT(v.violations[0], Catch::Contains("went back"));
  }
}

TEST_CASE("the counter checker finds an increment that was lost", "[core][checker]") {
  support::temp_directory dir;
  const auto journal = dir.path() / "store.journal";
  support::append_history_line(journal, "10 1");
  support::append_history_line(journal, "11 2");
  CHECK(support::check_fenced_counter(journal).empty());
  support::append_history_line(journal, "12 2");  // read 1 before 11 wrote, stored 2 over 2
  const auto violations = support::check_fenced_counter(journal);
  REQUIRE(violations.size() == 1);
  CHECK_THAT(violations[0], Catch::Contains("lost update"));
}

TEST_CASE("the semaphore checker counts holders at once against max_count", "[core][checker]") {
  history h{.sections = {held(1, 1, 0, 10, 0), held(2, 2, 2, 8, 0), held(3, 3, 4, 6, 0)}};
  CHECK(check_semaphore(h, 3).violations.empty());
  REQUIRE(check_semaphore(h, 2).violations.size() == 1);
  CHECK_THAT(check_semaphore(h, 2).violations[0], Catch::Contains("3 holders at once"));
  h.faults.push_back({.pid = 3, .from = 0, .to = 100});  // a faulted holder does not count
  CHECK(check_semaphore(h, 2).violations.empty());
}
