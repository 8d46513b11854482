// sql_wait_machine: every event in every phase, the races and faults the SQL backends meet, and
// every short sequence of events, with PostgreSQL's and MySQL's traits, without a server. The
// postgres and mariadb contract, cancel and fault tests prove the same machine against servers.
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "sql_wait_machine.hpp"

namespace {

using dlock::detail::sql_wait_machine;
using dlock::detail::sql_wait_traits;
using phase = sql_wait_machine::phase;
using event = sql_wait_machine::event;
using action = sql_wait_machine::action;
using actions = std::vector<action>;

// As the backends start their waits.
constexpr sql_wait_traits postgres{
    .deadline_ends_wait = true, .cancel_repeats = true, .give_back_after_cancel = false};
constexpr sql_wait_traits mysql{
    .deadline_ends_wait = false, .cancel_repeats = false, .give_back_after_cancel = true};

actions list(const sql_wait_machine::actions& got) { return {got.begin(), got.end()}; }

std::string describe(const actions& list) {
  std::string text = "{";
  for (const auto a : list) {
    if (text.size() > 1) text += ", ";
    text += dlock::detail::name_of(a);
  }
  return text + "}";
}

std::string describe(const sql_wait_traits& t) { return t.cancel_repeats ? "postgres" : "mysql"; }

sql_wait_machine started(const sql_wait_traits& traits) {
  sql_wait_machine m;
  m.start(traits);
  return m;
}

// A machine brought into `p` by the usual road: cancelling after a stop whose cancel went out,
// expiring at a deadline the server ends, giving back after a timeout nobody asked for. False
// where the traits have no road to `p` (MySQL never expires).
bool bring(sql_wait_machine& m, phase p, const sql_wait_traits& traits) {
  if (p == phase::idle) return true;
  m.start(traits);
  switch (p) {
    case phase::expiring:
      if (!traits.deadline_ends_wait) return false;
      m.on(event::deadline);
      break;
    case phase::cancelling:
      m.on(event::stop);
      m.on(event::cancel_sent);
      break;
    case phase::giving_back: m.on(event::timed_out); break;
    case phase::done: m.on(event::granted); break;
    case phase::idle:
    case phase::waiting: break;
  }
  return true;
}

struct outcome {
  actions does;
  phase next;
};

// What each event does in each phase, for `t`: the whole table, stated once.
std::map<std::pair<phase, event>, outcome> expected_table(const sql_wait_traits& t) {
  const actions none;
  const actions discard_failed{action::report_failed, action::discard_session};
  const actions discard_declined{action::report_declined, action::discard_session};
  std::map<std::pair<phase, event>, outcome> table;
  // By default nothing happens and the phase stays; the rows below say otherwise.
  for (const auto p : sql_wait_machine::all_phases) {
    for (const auto e : sql_wait_machine::all_events) table[{p, e}] = {none, p};
  }
  // An answer no cancel of ours touched, while waiting or expiring.
  for (const auto p : {phase::waiting, phase::expiring}) {
    table[{p, event::granted}] = {{action::report_granted, action::keep_session}, phase::done};
    table[{p, event::not_granted}] = {{action::report_declined, action::keep_session},
                                      phase::done};
    table[{p, event::timed_out}] = {{action::give_back}, phase::giving_back};
    table[{p, event::failed_cleanly}] = {{action::report_failed, action::keep_session},
                                         phase::done};
    table[{p, event::failed}] = {discard_failed, phase::done};
    table[{p, event::connection_lost}] = {discard_failed, phase::done};
  }
  for (const auto p : {phase::waiting, phase::expiring, phase::cancelling, phase::giving_back}) {
    table[{p, event::server_silent}] = {discard_failed, phase::done};
  }
  table[{phase::waiting, event::stop}] = {{action::send_cancel}, phase::cancelling};
  table[{phase::waiting, event::deadline}] =
      t.deadline_ends_wait ? outcome{{action::arm_answer_timeout}, phase::expiring}
                           : outcome{{action::send_cancel}, phase::cancelling};
  table[{phase::expiring, event::answer_overdue}] = {{action::abandon_session}, phase::expiring};
  // Once a cancel went out, every answer is settled by closing the session (MySQL gives back
  // first); a lost connection after a stop is what the caller asked for.
  for (const auto e : {event::granted, event::not_granted, event::timed_out,
                       event::failed_cleanly, event::failed}) {
    table[{phase::cancelling, e}] = t.give_back_after_cancel
                                        ? outcome{{action::give_back}, phase::giving_back}
                                        : outcome{discard_declined, phase::done};
  }
  table[{phase::cancelling, event::connection_lost}] = {discard_declined, phase::done};
  if (t.cancel_repeats) {
    for (const auto e : {event::cancel_sent, event::cancel_busy}) {
      table[{phase::cancelling, e}] = {{action::arm_cancel_retry}, phase::cancelling};
    }
    table[{phase::cancelling, event::cancel_retry_due}] = {{action::send_cancel},
                                                           phase::cancelling};
  }
  table[{phase::cancelling, event::cancel_confirmed}] = {{action::arm_patience},
                                                         phase::cancelling};
  table[{phase::cancelling, event::answer_overdue}] = {{action::abandon_session},
                                                       phase::cancelling};
  table[{phase::cancelling, event::give_up}] = {discard_declined, phase::done};
  // A give-back after a timeout nobody asked for: a withdrawal now only bounds it.
  table[{phase::giving_back, event::stop}] = {{action::arm_answer_timeout}, phase::giving_back};
  table[{phase::giving_back, event::deadline}] = {{action::arm_answer_timeout},
                                                  phase::giving_back};
  table[{phase::giving_back, event::given_back}] = {
      {action::report_declined, action::keep_session}, phase::done};
  table[{phase::giving_back, event::give_back_failed}] = {discard_declined, phase::done};
  return table;
}

}  // namespace

TEST_CASE("sql_wait_machine: each event in each phase does what the table says",
          "[sql][unit]") {
  for (const auto& traits : {postgres, mysql}) {
    const auto table = expected_table(traits);
    for (const auto p : sql_wait_machine::all_phases) {
      for (const auto e : sql_wait_machine::all_events) {
        sql_wait_machine m;
        if (!bring(m, p, traits)) continue;
        REQUIRE(m.current() == p);
        const auto& want = table.at({p, e});
        const auto got = list(m.on(e));
        INFO(describe(traits) << ": phase " << dlock::detail::name_of(p) << ", event "
                              << dlock::detail::name_of(e) << ": got " << describe(got)
                              << ", want " << describe(want.does));
        CHECK(got == want.does);
        CHECK(m.current() == want.next);
      }
    }
  }
}

TEST_CASE("sql_wait_machine: it sends its wait once", "[sql][unit]") {
  sql_wait_machine m;
  CHECK(list(m.start(postgres)) == actions{action::send_wait});
  CHECK(m.current() == phase::waiting);
  CHECK_THROWS_AS(m.start(postgres), std::logic_error);
}

TEST_CASE("sql_wait_machine: a stop before the wait reached the server closes its session",
          "[sql][unit]") {
  for (const auto& traits : {postgres, mysql}) {
    auto m = started(traits);
    CHECK(list(m.on(event::stop)) == actions{action::send_cancel});
    CHECK(list(m.on(event::nothing_to_cancel)) ==
          actions{action::report_declined, action::discard_session});
    // The closed session's statement fails as broken: already settled.
    CHECK(list(m.on(event::connection_lost)).empty());
  }
}

TEST_CASE("sql_wait_machine: a grant that races the cancel is freed with its session",
          "[sql][unit]") {
  SECTION("PostgreSQL closes the session at once") {
    auto m = started(postgres);
    m.on(event::stop);
    CHECK(list(m.on(event::cancel_sent)) ==
          actions{action::arm_cancel_retry, action::arm_answer_timeout});
    CHECK(list(m.on(event::granted)) == actions{action::report_declined, action::discard_session});
    CHECK(list(m.on(event::cancel_retry_due)).empty());  // a stale retry sends nothing
  }
  SECTION("MySQL gives back what the killed wait took, then closes the session") {
    auto m = started(mysql);
    m.on(event::stop);
    CHECK(list(m.on(event::cancel_sent)) == actions{action::arm_answer_timeout});
    CHECK(list(m.on(event::granted)) == actions{action::give_back});
    CHECK(list(m.on(event::given_back)) ==
          actions{action::report_declined, action::discard_session});
  }
  SECTION("a grant that answers before any cancel went out is the caller's") {
    auto m = started(postgres);
    m.on(event::stop);
    CHECK(list(m.on(event::cancel_busy)) ==
          actions{action::arm_cancel_retry, action::arm_answer_timeout});
    CHECK(list(m.on(event::granted)) == actions{action::report_granted, action::keep_session});
  }
  SECTION("a grant that came with the server's own timeout is looked for and let go") {
    auto m = started(postgres);
    CHECK(list(m.on(event::deadline)) == actions{action::arm_answer_timeout});
    CHECK(list(m.on(event::timed_out)) == actions{action::give_back});
    CHECK(list(m.on(event::given_back)) ==
          actions{action::report_declined, action::keep_session});
  }
}

TEST_CASE("sql_wait_machine: PostgreSQL's cancel is sent again until the wait answers",
          "[sql][unit]") {
  auto m = started(postgres);
  m.on(event::stop);
  std::vector<long long> delays;
  m.on(event::cancel_sent);
  delays.push_back(m.cancel_retry_delay().count());
  for (int i = 0; i < 5; ++i) {
    CHECK(list(m.on(event::cancel_retry_due)) == actions{action::send_cancel});
    CHECK(list(m.on(i % 2 ? event::cancel_busy : event::cancel_sent)) ==
          actions{action::arm_cancel_retry});
    delays.push_back(m.cancel_retry_delay().count());
  }
  CHECK(delays == std::vector<long long>{2, 4, 8, 16, 20, 20});
  CHECK(list(m.on(event::timed_out)) == actions{action::report_declined, action::discard_session});
}

TEST_CASE("sql_wait_machine: a second withdrawal changes nothing", "[sql][unit]") {
  for (const auto& traits : {postgres, mysql}) {
    auto m = started(traits);
    m.on(event::stop);
    m.on(event::cancel_sent);
    CHECK(list(m.on(event::stop)).empty());
    CHECK(list(m.on(event::deadline)).empty());
    CHECK(m.stopped());
    CHECK_FALSE(m.expired());
  }
}

TEST_CASE("sql_wait_machine: a lost connection is a failure unless a stop asked for the end",
          "[sql][unit]") {
  for (const auto& traits : {postgres, mysql}) {
    INFO(describe(traits));
    auto waiting = started(traits);
    CHECK(list(waiting.on(event::connection_lost)) ==
          actions{action::report_failed, action::discard_session});

    auto stopped = started(traits);
    stopped.on(event::stop);
    stopped.on(event::cancel_sent);
    CHECK(list(stopped.on(event::connection_lost)) ==
          actions{action::report_declined, action::discard_session});

    auto expired = started(traits);
    expired.on(event::deadline);
    expired.on(event::cancel_sent);  // MySQL kills at the deadline; PostgreSQL expires
    CHECK(list(expired.on(event::connection_lost)) ==
          actions{action::report_failed, action::discard_session});
  }
}

TEST_CASE("sql_wait_machine: a server that answers nothing is given up", "[sql][unit]") {
  SECTION("after the deadline: a failure") {
    auto m = started(postgres);
    m.on(event::deadline);
    CHECK(list(m.on(event::answer_overdue)) == actions{action::abandon_session});
    CHECK(list(m.on(event::answer_overdue)).empty());
    CHECK(list(m.on(event::connection_lost)) ==
          actions{action::report_failed, action::discard_session});
  }
  SECTION("after a stop, on the caller's thread: the grace ends it") {
    auto m = started(postgres);
    m.on(event::stop);
    m.on(event::cancel_sent);
    CHECK(list(m.on(event::give_up)) == actions{action::report_declined, action::discard_session});
  }
  SECTION("silent to the keepalive: a failure in every phase") {
    for (const auto p : {phase::waiting, phase::cancelling, phase::giving_back}) {
      sql_wait_machine m;
      bring(m, p, postgres);
      CHECK(list(m.on(event::server_silent)) ==
            actions{action::report_failed, action::discard_session});
    }
  }
}

TEST_CASE("sql_wait_machine: a killed batch that never answers is closed after the patience",
          "[sql][unit]") {
  auto m = started(mysql);
  CHECK(list(m.on(event::stop)) == actions{action::send_cancel});
  CHECK(list(m.on(event::cancel_sent)) == actions{action::arm_answer_timeout});
  CHECK(list(m.on(event::cancel_confirmed)) == actions{action::arm_patience});
  CHECK(list(m.on(event::patience_elapsed)) ==
        actions{action::report_declined, action::discard_session});
  CHECK(list(m.on(event::not_granted)).empty());  // the late answer of a closed session
  SECTION("and the patience also bounds the give-back of a batch that did answer") {
    auto answered = started(mysql);
    answered.on(event::stop);
    answered.on(event::cancel_sent);
    answered.on(event::not_granted);
    CHECK(list(answered.on(event::cancel_confirmed)) == actions{action::arm_patience});
    CHECK(list(answered.on(event::patience_elapsed)) ==
          actions{action::report_declined, action::discard_session});
  }
}

// Every sequence of up to four events after each backend's start. Each one keeps the
// promises of sql_wait_machine.hpp: at most one report, and a report exactly when done; a
// verdict on the session (keep or discard, never both) exactly with the report; a grant is
// reported or its session never kept; a session whose state is unknown (a cancel of ours went
// out, a failure, a timeout not given back) is never kept; a lost or silent server is "not
// obtained" only after a stop; a cancel is sent only after a withdrawal, and again only where
// the server drops early ones; nothing follows the report.
TEST_CASE("sql_wait_machine: every short sequence of events keeps its promises", "[sql][unit]") {
  constexpr int length = 4;
  const auto& events = sql_wait_machine::all_events;
  std::size_t sequences = 0;
  for (const auto& traits : {postgres, mysql}) {
    std::vector<std::size_t> pick(length, 0);
    bool tracing = false;
    while (true) {
      sql_wait_machine m;
      m.start(traits);
      int reports = 0, cancels = 0;
      bool withdrawn = false, stopped_first = false, broken = false;
      bool cancel_out = false, grant_unreported = false, timeout_unsettled = false;
      std::string trace;  // written only when a promise broke: the run is replayed
      for (const auto i : pick) {
        const event e = events[i];
        const phase before = m.current();
        const auto got = list(m.on(e));
        if (tracing) {
          trace += ", " + std::string(dlock::detail::name_of(e)) + " -> " + describe(got);
        }
        int step_reports = 0, verdicts = 0;
        bool kept = false, granted = false, declined = false;
        for (const auto a : got) {
          step_reports += a == action::report_granted || a == action::report_declined ||
                          a == action::report_failed;
          verdicts += a == action::keep_session || a == action::discard_session;
          kept |= a == action::keep_session;
          granted |= a == action::report_granted;
          declined |= a == action::report_declined;
          cancels += a == action::send_cancel;
        }
        reports += step_reports;
        if ((e == event::stop || e == event::deadline) && !withdrawn) {
          withdrawn = true;
          stopped_first = e == event::stop;
        }
        // What may leave the session holding a grant, or a cancel landing on it later.
        const bool answering = before == phase::waiting || before == phase::expiring ||
                               before == phase::cancelling;
        cancel_out |= e == event::cancel_sent && before == phase::cancelling;
        grant_unreported |= e == event::granted && answering && !granted;
        timeout_unsettled |= e == event::timed_out && answering;
        if (e == event::given_back && before == phase::giving_back) timeout_unsettled = false;
        const bool may_keep =
            granted || (!cancel_out && !grant_unreported && !timeout_unsettled);
        broken |= step_reports > 1 || verdicts != step_reports || (kept && !may_keep) ||
                  (granted && e != event::granted) || (before == phase::done && !got.empty()) ||
                  (declined && (e == event::connection_lost || e == event::server_silent) &&
                   !stopped_first) ||
                  (cancels > 0 && !withdrawn);
      }
      broken |= reports > 1 || (reports == 1) != (m.current() == phase::done) ||
                (!traits.cancel_repeats && cancels > 1);
      // One check per broken promise, not per sequence: 320,000 sequences stay fast.
      if (broken && !tracing) {
        tracing = true;  // the same sequence again, written down
        continue;
      }
      ++sequences;
      if (broken) FAIL_CHECK(describe(traits) << trace);
      tracing = false;
      std::size_t digit = 0;
      while (digit < pick.size() && ++pick[digit] == events.size()) pick[digit++] = 0;
      if (digit == pick.size()) break;
    }
  }
  CHECK(sequences == 2 * 20 * 20 * 20 * 20);
}
