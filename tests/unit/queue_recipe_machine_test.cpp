// queue_recipe_machine: every event in every phase, each scenario etcd's and ZooKeeper's
// acquires meet, and every short sequence of events, without a server. Their contract and
// fault suites prove the same machine end to end.
#include <array>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "machine_actions.hpp"

#include <dlock/core/backend/queue_recipe_machine.hpp>

namespace {

using dlock::queue_recipe_machine;
using phase = queue_recipe_machine::phase;
using event = queue_recipe_machine::event;
using action = queue_recipe_machine::action;

using outcome = support::outcome<action, phase>;

// The situations an acquire meets, each reached by its usual road. "queueing" has a call out
// (a create or a listing); "watching" is queueing with none (a watch set).
enum class situation { idle, queueing, watching, withdrawing, deleting, abandoning, done };
constexpr std::array all_situations{situation::idle,        situation::queueing,
                                    situation::watching,    situation::withdrawing,
                                    situation::deleting,    situation::abandoning,
                                    situation::done};

std::string_view name_of(situation s) {
  switch (s) {
    case situation::idle: return "idle";
    case situation::queueing: return "queueing";
    case situation::watching: return "watching";
    case situation::withdrawing: return "withdrawing";
    case situation::deleting: return "deleting";
    case situation::abandoning: return "abandoning";
    case situation::done: return "done";
  }
  return "?";
}

// The events after start(true) that lead to each situation.
const std::map<situation, std::vector<event>>& roads() {
  static const std::map<situation, std::vector<event>> roads{
      {situation::queueing, {event::call_sent}},
      {situation::watching, {}},
      {situation::withdrawing, {event::call_sent, event::withdraw}},
      {situation::deleting, {event::withdraw}},
      {situation::abandoning, {event::call_sent, event::connection_lost}},
      {situation::done, {event::first_in_queue}}};
  return roads;
}

queue_recipe_machine machine_in(situation s) {
  queue_recipe_machine m;
  if (s == situation::idle) return m;
  m.start(true);
  for (const auto e : roads().at(s)) m.on(e);
  return m;
}

// What each event does in each situation: the whole table, stated once.
std::map<std::pair<situation, event>, outcome> expected_table() {
  const std::vector<action> none;
  const std::vector<action> fail_now{action::abandon_own_key, action::report_failed};
  const std::vector<action> tell_failure{action::report_failed};
  std::map<std::pair<situation, event>, outcome> t;
  const std::map<situation, phase> phase_of{
      {situation::idle, phase::idle},         {situation::queueing, phase::queueing},
      {situation::watching, phase::queueing}, {situation::withdrawing, phase::withdrawing},
      {situation::deleting, phase::deleting}, {situation::abandoning, phase::abandoning},
      {situation::done, phase::done}};
  // By default nothing happens and the phase stays; the rows below say otherwise.
  for (const auto s : all_situations) {
    for (const auto e : queue_recipe_machine::all_events) t[{s, e}] = {none, phase_of.at(s)};
  }
  // Before the start, only a withdrawal: nothing was created.
  t[{situation::idle, event::withdraw}] = {{action::report_declined}, phase::done};
  // Queueing, whether a call is out or a watch is set.
  for (const auto s : {situation::queueing, situation::watching}) {
    t[{s, event::call_failed}] = {fail_now, phase::done};
    t[{s, event::first_in_queue}] = {{action::report_granted}, phase::done};
    t[{s, event::someone_in_front}] = {{action::watch_predecessor}, phase::queueing};
    t[{s, event::own_key_gone}] = {{action::queue_key}, phase::queueing};
    t[{s, event::predecessor_gone}] = {{action::list_queue}, phase::queueing};
  }
  // A call out may be creating our key: a stop waits for it, a failure is told at once.
  t[{situation::queueing, event::call_answered}] = {{action::read_answer}, phase::queueing};
  t[{situation::queueing, event::withdraw}] = {none, phase::withdrawing};
  t[{situation::queueing, event::connection_lost}] = {tell_failure, phase::abandoning};
  t[{situation::queueing, event::failed}] = {tell_failure, phase::abandoning};
  t[{situation::watching, event::withdraw}] = {{action::delete_own_key}, phase::deleting};
  t[{situation::watching, event::connection_lost}] = {fail_now, phase::done};
  t[{situation::watching, event::failed}] = {fail_now, phase::done};
  // Withdrawing: the last answer deletes our key; a failure is still the caller's answer.
  t[{situation::withdrawing, event::call_answered}] = {{action::delete_own_key}, phase::deleting};
  t[{situation::withdrawing, event::call_failed}] = {fail_now, phase::done};
  t[{situation::withdrawing, event::failed}] = {tell_failure, phase::abandoning};
  t[{situation::deleting, event::key_deleted}] = {{action::report_declined}, phase::done};
  t[{situation::abandoning, event::call_answered}] = {{action::abandon_own_key}, phase::done};
  t[{situation::abandoning, event::call_failed}] = {{action::abandon_own_key}, phase::done};
  return t;
}

}  // namespace

TEST_CASE("queue_recipe_machine: each event in each phase does what the table says",
          "[core][unit]") {
  const auto table = expected_table();
  for (const auto s : all_situations) {
    for (const auto e : queue_recipe_machine::all_events) {
      queue_recipe_machine m = machine_in(s);
      const auto& want = table.at({s, e});
      const auto got = support::list(m.on(e));
      INFO("situation " << name_of(s) << ", event " << dlock::name_of(e) << ": got "
                        << support::describe(got) << ", want " << support::describe(want.actions));
      CHECK(got == want.actions);
      CHECK(m.current() == want.next);
    }
  }
  // Every phase is in the table.
  for (const auto p : queue_recipe_machine::all_phases) {
    bool seen = false;
    for (const auto s : all_situations) seen = seen || machine_in(s).current() == p;
    CHECK(seen);
  }
}

TEST_CASE("queue_recipe_machine: how it starts", "[core][unit]") {
  queue_recipe_machine m;
  CHECK(support::list(m.start(true)) == std::vector{action::queue_key});
  CHECK(m.current() == phase::queueing);
  CHECK_THROWS_AS(m.start(true), std::logic_error);
}

TEST_CASE("queue_recipe_machine: the uncontended grant is one call and one report",
          "[core][unit]") {
  queue_recipe_machine m;
  m.start(false);
  m.on(event::call_sent);  // the create, with the listing
  CHECK(support::list(m.on(event::call_answered)) == std::vector{action::read_answer});
  CHECK(support::list(m.on(event::first_in_queue)) == std::vector{action::report_granted});
  CHECK(m.current() == phase::done);
  CHECK(m.reported());
}

TEST_CASE("queue_recipe_machine: a one-shot attempt behind someone deletes its key, then "
          "declines",
          "[core][unit]") {
  queue_recipe_machine m;
  m.start(false);
  CHECK(support::list(m.on(event::someone_in_front)) == std::vector{action::delete_own_key});
  CHECK_FALSE(m.reported());
  CHECK(support::list(m.on(event::key_deleted)) == std::vector{action::report_declined});
}

TEST_CASE("queue_recipe_machine: a waiter watches, lists again, and is granted", "[core][unit]") {
  queue_recipe_machine m = machine_in(situation::watching);
  CHECK(support::list(m.on(event::someone_in_front)) == std::vector{action::watch_predecessor});
  CHECK(support::list(m.on(event::predecessor_gone)) == std::vector{action::list_queue});
  m.on(event::call_sent);
  CHECK(support::list(m.on(event::call_answered)) == std::vector{action::read_answer});
  CHECK(support::list(m.on(event::own_key_gone)) == std::vector{action::queue_key});
  CHECK(support::list(m.on(event::first_in_queue)) == std::vector{action::report_granted});
}

TEST_CASE("queue_recipe_machine: a grant racing a stop", "[core][unit]") {
  SECTION("the grant first: the lock is the answer, the stop comes too late") {
    queue_recipe_machine m = machine_in(situation::watching);
    CHECK(support::list(m.on(event::first_in_queue)) == std::vector{action::report_granted});
    CHECK(support::list(m.on(event::withdraw)).empty());
  }
  SECTION("the stop first: the answer that would grant is not read, our key is deleted") {
    queue_recipe_machine m = machine_in(situation::queueing);
    CHECK(support::list(m.on(event::withdraw)).empty());
    CHECK(support::list(m.on(event::call_answered)) == std::vector{action::delete_own_key});
    CHECK(support::list(m.on(event::first_in_queue)).empty());
    CHECK(support::list(m.on(event::key_deleted)) == std::vector{action::report_declined});
  }
}

TEST_CASE("queue_recipe_machine: a stop during the withdrawal changes nothing", "[core][unit]") {
  queue_recipe_machine m = machine_in(situation::withdrawing);
  m.on(event::call_sent);  // a second call was out
  CHECK(support::list(m.on(event::withdraw)).empty());
  CHECK(support::list(m.on(event::call_answered)).empty());  // one still out
  CHECK(support::list(m.on(event::call_answered)) == std::vector{action::delete_own_key});
  CHECK(support::list(m.on(event::withdraw)).empty());
  CHECK(support::list(m.on(event::key_deleted)) == std::vector{action::report_declined});
  CHECK(support::list(m.on(event::key_deleted)).empty());
}

TEST_CASE("queue_recipe_machine: a connection lost mid-queue is told at once; the key goes "
          "once the call out answered",
          "[core][unit]") {
  queue_recipe_machine m = machine_in(situation::queueing);
  CHECK(support::list(m.on(event::connection_lost)) == std::vector{action::report_failed});
  CHECK(m.reported());
  CHECK(support::list(m.on(event::withdraw)).empty());
  CHECK(support::list(m.on(event::first_in_queue)).empty());
  CHECK(support::list(m.on(event::call_answered)) == std::vector{action::abandon_own_key});
  CHECK(m.current() == phase::done);
}

TEST_CASE("queue_recipe_machine: a connection lost during a withdrawal lets the withdrawal end",
          "[core][unit]") {
  queue_recipe_machine m = machine_in(situation::withdrawing);
  CHECK(support::list(m.on(event::connection_lost)).empty());
  CHECK(support::list(m.on(event::call_answered)) == std::vector{action::delete_own_key});
  CHECK(support::list(m.on(event::connection_lost)).empty());
  CHECK(support::list(m.on(event::key_deleted)) == std::vector{action::report_declined});
}

// Every sequence of up to five events after each start, as if each answer were read: one
// report at most, and one by the end; a report is the last action of its event; once done,
// nothing more; our key is deleted or abandoned only while no call is out, and by the end it
// is either reported held or deleted (or abandoned); "declined" only after its delete
// answered; a failure may be told while calls are out, "declined" never.
// The sequences feed events no adapter would (a call sent while our key's delete is out):
// the promises hold even then.
TEST_CASE("queue_recipe_machine: every short sequence of events keeps its promises",
          "[core][unit]") {
  constexpr std::size_t length = 5;
  const auto& events = queue_recipe_machine::all_events;
  std::size_t sequences = 0;
  for (const bool waits : {true, false}) {
    std::array<std::size_t, length> pick{};
    while (true) {
      queue_recipe_machine m;
      int reports = 0, granted = 0, settled = 0, out = 0;
      bool delete_asked = false, delete_answered = false, broken = false;
      std::string why;
      auto check = [&](bool promise, const char* what) {
        if (!promise && !broken) broken = true, why = what;
      };
      auto count = [&](const queue_recipe_machine::actions& actions, bool was_done) {
        check(!was_done || actions.size() == 0, "an action after the end");
        for (std::size_t i = 0; i < actions.size(); ++i) {
          const action a = *(actions.begin() + i);
          const bool is_report = a == action::report_granted || a == action::report_declined ||
                                 a == action::report_failed;
          if (is_report) {
            ++reports;
            check(i + 1 == actions.size(), "a report before another action");
          }
          if (a == action::report_granted) ++granted;
          if (a == action::report_declined) {
            check(delete_answered || !delete_asked, "declined before the delete answered");
            check(out == 0, "declined while a call is out");
          }
          if (a == action::delete_own_key || a == action::abandon_own_key) {
            ++settled;
            check(out == 0, "our key deleted while a call is out");
          }
          delete_asked |= a == action::delete_own_key;
        }
      };
      count(m.start(waits), false);
      for (const auto i : pick) {
        const event e = events[i];
        if (e == event::call_sent && m.current() != phase::done) ++out;
        if ((e == event::call_answered || e == event::call_failed) && out > 0 &&
            m.current() != phase::done) {
          --out;
        }
        if (e == event::key_deleted && delete_asked) delete_answered = true;
        const bool was_done = m.current() == phase::done;
        count(m.on(e), was_done);
        check(m.calls_out() == out || m.current() == phase::done, "calls out miscounted");
      }
      ++sequences;
      check(reports == (m.reported() ? 1 : 0), "not exactly one report");
      check(m.current() != phase::done || reports == 1, "done without a report");
      // A call sent while our key's delete was out deletes it again once answered.
      check(m.current() != phase::done || (granted == 1) != (settled >= 1),
            "done with our key neither held nor deleted");
      check(granted == 0 || settled == 0, "a granted key deleted");
      if (broken) {
        std::string trace = waits ? "start(wait)" : "start(once)";
        for (const auto i : pick) trace += ", " + std::string(dlock::name_of(events[i]));
        FAIL_CHECK(trace << ": " << why << " (ends " << dlock::name_of(m.current()) << ")");
      }
      // Next sequence, like an odometer.
      std::size_t digit = 0;
      while (digit < pick.size() && ++pick[digit] == events.size()) pick[digit++] = 0;
      if (digit == pick.size()) break;
    }
  }
  CHECK(sequences == 2 * 161051);
}

TEST_CASE("queue_recipe_machine: a call sent while our key's delete is out deletes it again",
          "[core][unit]") {
  queue_recipe_machine m = machine_in(situation::deleting);
  m.on(event::call_sent);
  CHECK(support::list(m.on(event::key_deleted)).empty());
  CHECK(m.current() == phase::withdrawing);
  CHECK(support::list(m.on(event::call_answered)) == std::vector{action::delete_own_key});
  CHECK(support::list(m.on(event::key_deleted)) == std::vector{action::report_declined});
}

TEST_CASE("queue_recipe_machine: names", "[core][unit]") {
  CHECK(dlock::name_of(phase::abandoning) == "abandoning");
  CHECK(dlock::name_of(phase::done) == "done");
  CHECK(dlock::name_of(event::predecessor_gone) == "predecessor_gone");
  CHECK(dlock::name_of(event::key_deleted) == "key_deleted");
  CHECK(dlock::name_of(action::watch_predecessor) == "watch_predecessor");
  CHECK(dlock::name_of(action::report_failed) == "report_failed");
}
