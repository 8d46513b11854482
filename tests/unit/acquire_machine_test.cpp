// acquire_machine: every event in every phase, and every short sequence of events, without a
// backend. The contract suite's cancel and stop-latency cases prove the same machine end to
// end against each backend's servers.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "machine_actions.hpp"

#include "acquire_machine.hpp"

namespace {

using dlock::detail::acquire_machine;
using dlock::detail::ending;
using phase = acquire_machine::phase;
using event = acquire_machine::event;
using action = acquire_machine::action;

using support::describe;
using support::list;
using outcome = support::outcome<action, phase>;

// A machine brought into `p` by the usual road; where it has the local gate, it holds it.
acquire_machine machine_in(phase p) {
  acquire_machine m;
  if (p == phase::idle) return m;
  m.start(true, false);
  if (p == phase::queued) return m;
  m.on(event::gate_granted);
  if (p == phase::at_backend) return m;
  if (p == phase::done) {
    m.on(event::backend_declined);
    return m;
  }
  m.on(event::stop);
  if (p == phase::withdrawing) return m;
  m.on(event::grace_elapsed);
  return m;
}

// What each event does in each phase: the whole table, stated once.
std::map<std::pair<phase, event>, outcome> expected_table() {
  const std::vector<action> none;
  const std::vector<action> pass_gate{action::leave_gate};
  const std::vector<action> give_back{action::give_back};
  const std::vector<action> leave_and_answer{action::leave_gate, action::answer};
  std::map<std::pair<phase, event>, outcome> t;
  for (const auto e : acquire_machine::all_events) {
    // By default nothing happens and the phase stays; the rows below say otherwise.
    for (const auto p : acquire_machine::all_phases) t[{p, e}] = {none, p};
    // A gate handed to an acquire that cannot use it goes on to the next; a grant nobody
    // waits for is given back.
    for (const auto p : acquire_machine::all_phases) {
      if (p != phase::queued) t[{p, event::gate_granted}] = {pass_gate, p};
      if (p != phase::at_backend && p != phase::withdrawing) {
        t[{p, event::backend_granted}] = {give_back, p};
      }
    }
  }
  t[{phase::queued, event::gate_granted}] = {{action::start_backend}, phase::at_backend};
  t[{phase::queued, event::gate_withdrawn}] = {{action::answer}, phase::done};
  t[{phase::queued, event::deadline}] = {{action::withdraw_from_gate}, phase::queued};
  t[{phase::queued, event::stop}] = {{action::withdraw_from_gate}, phase::queued};
  for (const auto p : {phase::at_backend, phase::withdrawing}) {
    for (const auto e : {event::backend_granted, event::backend_declined, event::backend_failed}) {
      t[{p, e}] = {leave_and_answer, phase::done};
    }
  }
  // A stop is answered at the grace; a deadline waits for the backend's verdict.
  t[{phase::at_backend, event::stop}] = {{action::withdraw_attempt, action::arm_grace},
                                         phase::withdrawing};
  t[{phase::at_backend, event::deadline}] = {{action::withdraw_attempt}, phase::withdrawing};
  t[{phase::withdrawing, event::grace_elapsed}] = {leave_and_answer, phase::answered};
  t[{phase::answered, event::backend_granted}] = {give_back, phase::done};
  t[{phase::answered, event::backend_declined}] = {none, phase::done};
  t[{phase::answered, event::backend_failed}] = {none, phase::done};
  return t;
}

}  // namespace

TEST_CASE("acquire_machine: each event in each phase does what the table says", "[core][unit]") {
  const auto table = expected_table();
  for (const auto p : acquire_machine::all_phases) {
    for (const auto e : acquire_machine::all_events) {
      acquire_machine m = machine_in(p);
      REQUIRE(m.current() == p);
      const auto& want = table.at({p, e});
      const auto got = list(m.on(e));
      INFO("phase " << dlock::detail::name_of(p) << ", event " << dlock::detail::name_of(e)
                    << ": got " << describe(got) << ", want " << describe(want.actions));
      CHECK(got == want.actions);
      CHECK(m.current() == want.next);
    }
  }
}

TEST_CASE("acquire_machine: how it starts", "[core][unit]") {
  SECTION("a stop requested before the start answers at once, as stopped") {
    acquire_machine m;
    CHECK(list(m.start(true, true)) == std::vector{action::answer});
    CHECK(m.current() == phase::done);
    CHECK(m.why_not() == ending::stopped);
  }
  SECTION("a zero timeout makes its one attempt without the local gate") {
    acquire_machine m;
    CHECK(list(m.start(false, false)) == std::vector{action::start_backend});
    CHECK(list(m.on(event::backend_declined)) == std::vector{action::answer});
    CHECK(m.why_not() == ending::none);
  }
  SECTION("a wait queues at the local gate first") {
    acquire_machine m;
    CHECK(list(m.start(true, false)) == std::vector{action::enter_gate});
  }
  SECTION("only once") {
    acquire_machine m;
    m.start(true, false);
    CHECK_THROWS_AS(m.start(true, false), std::logic_error);
  }
}

TEST_CASE("acquire_machine: a stop while the gate is on its way answers when it arrives",
          "[core][unit]") {
  acquire_machine m;
  m.start(true, false);
  CHECK(list(m.on(event::stop)) == std::vector{action::withdraw_from_gate});
  // withdraw_from_gate did not find it queued: the gate was handed over meanwhile.
  CHECK(list(m.on(event::deadline)).empty());
  CHECK(list(m.on(event::gate_granted)) == std::vector{action::leave_gate, action::answer});
  CHECK(m.why_not() == ending::stopped);
  CHECK(m.current() == phase::done);
}

TEST_CASE("acquire_machine: the first of a timeout and a stop names the ending", "[core][unit]") {
  for (const auto& [first, second, why] :
       {std::tuple{event::deadline, event::stop, ending::timed_out},
        std::tuple{event::stop, event::deadline, ending::stopped}}) {
    acquire_machine m = machine_in(phase::at_backend);
    m.on(first);
    m.on(second);
    CHECK(m.why_not() == why);
  }
}

TEST_CASE("acquire_machine: a deadline waits for the backend's verdict; a stop after it is "
          "answered at the grace",
          "[core][unit]") {
  acquire_machine m = machine_in(phase::at_backend);
  CHECK(list(m.on(event::deadline)) == std::vector{action::withdraw_attempt});
  CHECK(list(m.on(event::grace_elapsed)).empty());  // no grace runs: a stale timer
  CHECK_FALSE(m.answered());
  CHECK(list(m.on(event::stop)) == std::vector{action::arm_grace});
  CHECK(list(m.on(event::stop)).empty());
  CHECK(list(m.on(event::grace_elapsed)) == std::vector{action::leave_gate, action::answer});
  CHECK(m.why_not() == ending::timed_out);
  CHECK(list(m.on(event::backend_failed)).empty());  // the verdict came too late: dropped
  CHECK(m.current() == phase::done);
}

TEST_CASE("acquire_machine: a grant that wins the race with a stop is the answer",
          "[core][unit]") {
  acquire_machine m = machine_in(phase::withdrawing);
  CHECK(list(m.on(event::backend_granted)) == std::vector{action::leave_gate, action::answer});
  CHECK(list(m.on(event::grace_elapsed)).empty());
}

// Every sequence of up to five events after each start: the caller hears exactly once (by the
// end of a sequence that reaches a backend's answer or the grace), never before the backend
// confirmed or the grace passed; every grant is either the answer or given back; a gate the
// machine took is left by the time it answered; the backend is started at most once and
// asked to withdraw only after it started.
TEST_CASE("acquire_machine: every short sequence of events keeps its promises", "[core][unit]") {
  constexpr int length = 5;
  const auto& events = acquire_machine::all_events;
  std::size_t sequences = 0;
  for (const bool waits : {true, false}) {
    std::vector<std::size_t> pick(length, 0);
    while (true) {
      acquire_machine m;
      int answers = 0, gates_taken = 0, gates_left = 0, starts = 0;
      bool withdrew_early = false, lost_grant = false;
      std::string trace = waits ? "start(wait)" : "start(once)";
      auto count = [&](const std::vector<action>& actions) {
        for (const auto a : actions) {
          answers += a == action::answer;
          gates_left += a == action::leave_gate;
          starts += a == action::start_backend;
          withdrew_early |= a == action::withdraw_attempt && starts == 0;
        }
        trace += " -> " + describe(actions);
      };
      count(list(m.start(waits, false)));
      for (const auto i : pick) {
        const event e = events[i];
        trace += ", " + std::string(dlock::detail::name_of(e));
        gates_taken += e == event::gate_granted;
        const auto got = list(m.on(e));
        count(got);
        if (e == event::backend_granted) {
          const bool kept = std::find(got.begin(), got.end(), action::answer) != got.end();
          const bool given_back =
              std::find(got.begin(), got.end(), action::give_back) != got.end();
          lost_grant |= kept == given_back;
        }
      }
      ++sequences;
      // One CHECK per broken promise, not per sequence: 65,536 sequences stay fast.
      const bool kept = answers == (m.answered() ? 1 : 0) && starts <= 1 && !withdrew_early &&
                        !lost_grant && (!m.answered() || gates_left == gates_taken);
      if (!kept) {
        FAIL_CHECK(trace << ": answers " << answers << ", backend starts " << starts
                         << ", gates taken " << gates_taken << " and left " << gates_left
                         << (withdrew_early ? ", withdrew before starting" : "")
                         << (lost_grant ? ", a grant neither answered nor given back" : ""));
      }
      // Next sequence, like an odometer.
      std::size_t digit = 0;
      while (digit < pick.size() && ++pick[digit] == events.size()) pick[digit++] = 0;
      if (digit == pick.size()) break;
    }
  }
  CHECK(sequences == 2 * 32768);
}
