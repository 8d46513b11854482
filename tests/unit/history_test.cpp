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

section as(support::hold kind, section s) {
  s.kind = kind;
  return s;
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
  using support::hold;
  history h{.sections = {as(hold::slot, held(1, 1, 0, 10, 0)), as(hold::slot, held(2, 2, 2, 8, 0)),
                         as(hold::slot, held(3, 3, 4, 6, 0))}};
  CHECK(check_semaphore(h, 3).violations.empty());
  REQUIRE(check_semaphore(h, 2).violations.size() == 1);
  CHECK_THAT(check_semaphore(h, 2).violations[0], Catch::Contains("3 holders at once"));
  h.faults.push_back({.pid = 3, .from = 0, .to = 100});  // a faulted holder does not count
  CHECK(check_semaphore(h, 2).violations.empty());
}

TEST_CASE("the reader-writer checker lets readers share and finds a reader beside a writer",
          "[core][checker]") {
  using support::hold;
  history readers{.sections = {as(hold::read, held(1, 10, 0, 5, 0)),
                               as(hold::read, held(2, 11, 2, 9, 0))}};
  const auto shared = support::check_reader_writer(readers);
  CHECK(shared.violations.empty());
  CHECK(shared.excused_overlaps == 1);

  history mixed{.sections = {as(hold::read, held(1, 10, 0, 5, 0)),
                             as(hold::write, held(2, 11, 2, 9, 0))}};
  const auto v = support::check_reader_writer(mixed);
  REQUIRE(v.violations.size() == 1);
  CHECK_THAT(v.violations[0], Catch::Contains("a reader and a writer at once"));
  // The lock checker judges only lock sections: these are not its.
  CHECK(check_fenced_mutex(mixed).sections == 0);
}

TEST_CASE("the counter checker finds a lower token accepted", "[core][checker]") {
  support::temp_directory dir;
  const auto journal = dir.path() / "store.journal";
  support::append_history_line(journal, "11 1");
  support::append_history_line(journal, "10 2");  // a deposed holder's write let through
  const auto violations = support::check_fenced_counter(journal);
  REQUIRE(violations.size() == 1);
  CHECK_THAT(violations[0], Catch::Contains("token 10 accepted after 11"));
}

TEST_CASE("the fault judge fails a run whose faults did not land inside sections",
          "[core][checker]") {
  history h{.sections = {held(1, 10, 0, 50, 0), held(2, 11, 60, 90, 1)},
            .faults = {{.pid = 1, .from = 10, .to = 20},     // inside pid 1's section
                       {.pid = 2, .from = 55, .to = 58},     // before pid 2's
                       {.pid = 2, .from = 95, .to = 99}}};   // after it
  const auto figures = support::judge_faults(h, {.min_landed = 2});
  CHECK(figures.faults == 3);
  CHECK(figures.landed == 1);
  REQUIRE(figures.violations.size() == 1);
  CHECK_THAT(figures.violations[0], Catch::Contains("only 1 of 3 faults landed"));
  CHECK(support::judge_faults(h, {.min_landed = 1}).violations.empty());
}

TEST_CASE("the fault judge wants a refusal once a holder was paused past its lease",
          "[core][checker]") {
  section deposed = held(1, 10, 0, 50, 0);  // paused 5..45 with a lease of 30, and let write
  history h{.sections = {deposed, held(2, 11, 38, 44, 0)},
            .faults = {{.pid = 1, .from = 5, .to = 45}}};
  const auto figures = support::judge_faults(h, {.min_landed = 1, .lease_ns = 30});
  CHECK(figures.paused_past_lease == 1);
  CHECK(figures.refusals == 0);
  REQUIRE(figures.violations.size() == 1);
  CHECK_THAT(figures.violations[0], Catch::Contains("refused none"));

  h.sections[0].write_accepted = false;  // the store refused the old token
  const auto refused = support::judge_faults(h, {.min_landed = 1, .lease_ns = 30});
  CHECK(refused.refusals == 1);
  CHECK(refused.violations.empty());
}

TEST_CASE("a section begun and never ended is a killed one, or a malformed history",
          "[core][checker]") {
  support::temp_directory dir;
  const auto log = dir.path() / "history.log";
  support::append_history_line(log, "B 7 10 100 write");
  support::append_history_line(log, "S 7 10 100 200 4 1 0 write");
  support::append_history_line(log, "B 7 12 300 lock");
  SECTION("killed inside it") {
    support::append_history_line(log, "K 7 350");
    const history h = support::read_history(log);
    REQUIRE(h.sections.size() == 2);
    CHECK(h.sections[0].kind == support::hold::write);
    CHECK(h.sections[1].killed);
    CHECK(h.sections[1].end == 350);
    CHECK_FALSE(h.sections[1].refused());
    const auto figures = support::judge_faults(h, {.min_landed = 1});
    CHECK(figures.landed_kills == 1);
  }
  SECTION("never killed") {
    CHECK_THROWS_WITH(support::read_history(log), Catch::Contains("never ended"));
  }
}

TEST_CASE("the token checker orders a reader after a writer, not two readers admitted at once",
          "[core][checker]") {
  using support::hold;
  // One release admitted both readers; the one with the lower token learned of it later.
  history readers{.sections = {as(hold::read, held(1, 11, 0, 5, 0)),
                               as(hold::read, held(2, 10, 6, 9, 0))}};
  CHECK(support::check_reader_writer(readers).violations.empty());
  history after_writer{.sections = {as(hold::write, held(1, 11, 0, 5, 0)),
                                    as(hold::read, held(2, 10, 6, 9, 0))}};
  const auto v = support::check_reader_writer(after_writer);
  REQUIRE(v.violations.size() == 1);
  CHECK_THAT(v.violations[0], Catch::Contains("went back"));
}

TEST_CASE("a server restart excuses no overlap, and the fault judge counts what it struck",
          "[core][checker]") {
  support::temp_directory dir;
  const auto log = dir.path() / "history.log";
  support::append_history_line(log, "S 1 10 0 50 0 1 0 lock");   // held across the restart
  support::append_history_line(log, "S 2 11 15 90 1 1 1 lock");  // across it, told lost
  support::append_history_line(log, "S 3 12 0 50 - - 0 slot");    // across, but paused: not counted
  support::append_history_line(log, "P 3 25 28");
  support::append_history_line(log, "R 20 30 redis");
  support::append_history_line(log, "R 95 99 redis");            // while nobody held
  const history h = support::read_history(log);
  REQUIRE(h.restarts.size() == 2);
  CHECK(h.restarts[0].server == "redis");

  const auto figures =
      support::judge_faults(h, {.min_landed = 1, .min_sections_across_restart = 2});
  CHECK(figures.faults == 3);
  CHECK(figures.restarts == 2);
  CHECK(figures.landed_restarts == 1);
  CHECK(figures.held_across_restart == 1);
  CHECK(figures.lost_across_restart == 1);
  CHECK(figures.violations.empty());
  const auto wanting =
      support::judge_faults(h, {.min_landed = 1, .min_sections_across_restart = 3});
  REQUIRE(wanting.violations.size() == 1);
  CHECK_THAT(wanting.violations[0], Catch::Contains("only 2 sections outlasted"));

  // Neither holder of the overlap [15, 50] was told lost or faulted: the restart is no excuse.
  history overlapping = h;
  overlapping.sections[1].lost = false;
  const auto v = check_fenced_mutex(overlapping);
  REQUIRE(v.violations.size() == 1);
  CHECK_THAT(v.violations[0], Catch::Contains("two holders at once"));
  CHECK(check_fenced_mutex(h).violations.empty());  // pid 2 was told lost
}

TEST_CASE("a malformed restart line names itself", "[core][checker]") {
  support::temp_directory dir;
  const auto log = dir.path() / "history.log";
  support::append_history_line(log, "R 30 20 redis");  // ends before it begins
  CHECK_THROWS_WITH(support::read_history(log), Catch::Contains("malformed 'R 30 20 redis'"));
}
