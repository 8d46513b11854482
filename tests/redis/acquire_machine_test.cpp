// The Redis acquire's machine: every event in every phase, the races and faults by name, and
// every short sequence of events, without a server. withdraw_test.cpp and the contract suite
// prove the same cycle end to end against real servers.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "acquire_machine.hpp"
#include "machine_actions.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::redis::detail::acquire_machine;
using phase = acquire_machine::phase;
using event = acquire_machine::event;
using action = acquire_machine::action;
using clock_type = acquire_machine::clock;

const clock_type::time_point t0 = clock_type::time_point{} + 1h;

// RedLock with every step: a queued waiter whose grants Sentinel-style replicas confirm. The
// only shape that passes through every phase.
constexpr acquire_machine::shape full_cycle{.waits = true,
                                            .multi_node = true,
                                            .queues = true,
                                            .confirms_with_replicas = true,
                                            .expiry = 30s};
constexpr acquire_machine::shape one_server_waiter{
    .waits = true, .multi_node = false, .queues = true, .expiry = 30s};
constexpr acquire_machine::shape one_server_once{.expiry = 30s};
constexpr acquire_machine::shape redlock_reader{.waits = true, .multi_node = true, .expiry = 30s};

using support::describe;
using support::list;

std::vector<action> feed(acquire_machine& m, event e, clock_type::time_point at = t0) {
  return list(m.on(e, at));
}

acquire_machine started(acquire_machine::shape shape) {
  acquire_machine m(shape);
  m.start(t0);
  return m;
}

// A full_cycle machine brought into `p` by the usual road.
acquire_machine machine_in(phase p) {
  acquire_machine m(full_cycle);
  if (p == phase::idle) return m;
  m.start(t0);
  if (p == phase::reading_counters) return m;
  m.on(event::counters_read, t0);
  if (p == phase::trying) return m;
  if (p == phase::confirming) {
    m.on(event::try_granted, t0);
    return m;
  }
  m.on(event::try_taken, t0);
  if (p == phase::waiting) return m;
  m.on(event::withdraw, t0);
  if (p == phase::withdrawing) return m;
  m.on(event::withdrawal_confirmed, t0);
  return m;
}

struct outcome {
  std::vector<action> actions;
  phase next;
};

// What each event does in each phase of full_cycle: the whole table, stated once.
std::map<std::pair<phase, event>, outcome> expected_table() {
  const std::vector<action> none;
  const std::vector<action> give_back{action::give_back_try};
  const std::vector<action> fail_and_withdraw_behind{action::stop_waiting,
                                                     action::withdraw_behind,
                                                     action::report_failed};
  std::map<std::pair<phase, event>, outcome> t;
  for (const auto p : acquire_machine::all_phases) {
    // By default nothing happens and the phase stays; the rows below say otherwise.
    for (const auto e : acquire_machine::all_events) t[{p, e}] = {none, p};
    // An answer with no try (or WAIT) in flight for it is given back, whenever it comes.
    for (const auto e : {event::try_granted, event::try_taken, event::try_unreachable,
                         event::try_refused, event::replicas_acknowledged,
                         event::replicas_missing}) {
      t[{p, e}] = {give_back, p};
    }
    // Servers silent for an expiry fail whatever runs; a failure reports at once.
    if (p != phase::idle && p != phase::withdrawing && p != phase::done) {
      t[{p, event::servers_silent}] = {fail_and_withdraw_behind, phase::done};
    }
  }
  t[{phase::idle, event::withdraw}] = {{action::stop_waiting, action::report_declined},
                                       phase::done};
  // Nothing queued yet: a failure has nothing to withdraw.
  t[{phase::reading_counters, event::servers_silent}] = {
      {action::stop_waiting, action::report_failed}, phase::done};
  t[{phase::reading_counters, event::counters_read}] = {{action::send_try}, phase::trying};
  t[{phase::reading_counters, event::counters_unreachable}] = {
      {action::stop_waiting, action::report_failed}, phase::done};
  // A try in flight may still queue the waiter: its place is withdrawn once the try answered.
  t[{phase::trying, event::servers_silent}] = {{action::stop_waiting, action::report_failed},
                                               phase::done};
  t[{phase::trying, event::try_granted}] = {{action::confirm_with_replicas}, phase::confirming};
  t[{phase::trying, event::try_taken}] = {{action::give_back_keeping_place, action::report_waiting,
                                           action::listen, action::arm_retry},
                                          phase::waiting};
  t[{phase::trying, event::try_unreachable}] = {
      {action::give_back_keeping_place, action::stop_waiting, action::withdraw_behind,
       action::report_failed},
      phase::done};
  t[{phase::trying, event::try_refused}] = {{action::give_back_try, action::stop_waiting,
                                             action::withdraw_behind, action::report_failed},
                                            phase::done};
  t[{phase::confirming, event::replicas_acknowledged}] = {
      {action::stop_waiting, action::report_granted}, phase::done};
  t[{phase::confirming, event::replicas_missing}] = {
      {action::give_back_try, action::stop_waiting, action::withdraw_behind,
       action::report_failed},
      phase::done};
  for (const auto e : {event::channel_released, event::channel_lost}) {
    t[{phase::waiting, e}] = {{action::cancel_retry, action::read_counters},
                              phase::reading_counters};
  }
  t[{phase::waiting, event::retry_timer}] = {{action::read_counters}, phase::reading_counters};
  t[{phase::waiting, event::withdraw}] = {{action::stop_waiting, action::withdraw},
                                          phase::withdrawing};
  t[{phase::withdrawing, event::withdrawal_confirmed}] = {{action::report_declined},
                                                          phase::done};
  return t;
}

}  // namespace

TEST_CASE("redis acquire_machine: each event in each phase does what the table says",
          "[redis][unit]") {
  const auto table = expected_table();
  for (const auto p : acquire_machine::all_phases) {
    for (const auto e : acquire_machine::all_events) {
      acquire_machine m = machine_in(p);
      REQUIRE(m.current() == p);
      const auto& want = table.at({p, e});
      const auto got = feed(m, e);
      INFO("phase " << dlock::redis::detail::name_of(p) << ", event "
                    << dlock::redis::detail::name_of(e) << ": got " << describe(got)
                    << ", want " << describe(want.actions));
      CHECK(got == want.actions);
      CHECK(m.current() == want.next);
    }
  }
}

TEST_CASE("redis acquire_machine: how it starts", "[redis][unit]") {
  SECTION("one server tries at once; a zero timeout watches no contact") {
    acquire_machine m(one_server_once);
    CHECK(list(m.start(t0)) == std::vector{action::send_try});
    CHECK(m.heard_at() == t0);
  }
  SECTION("a RedLock waiter watches its servers and reads the fencing counters first") {
    acquire_machine m(full_cycle);
    CHECK(list(m.start(t0)) == std::vector{action::watch_contact, action::read_counters});
    CHECK_FALSE(m.queued());
  }
  SECTION("a withdrawal that came before the start leaves nothing to start") {
    acquire_machine m(full_cycle);
    feed(m, event::withdraw);
    CHECK(list(m.start(t0)).empty());
  }
  SECTION("only once") {
    acquire_machine m = started(full_cycle);
    CHECK_THROWS_AS(m.start(t0), std::logic_error);
  }
}

TEST_CASE("redis acquire_machine: the uncontended grant on one server is one try",
          "[redis][unit]") {
  acquire_machine m = started(one_server_once);
  CHECK(feed(m, event::try_granted) == std::vector{action::stop_waiting, action::report_granted});
  CHECK(m.reported());
}

TEST_CASE("redis acquire_machine: a zero timeout that finds the lock taken declines at once",
          "[redis][unit]") {
  acquire_machine m = started(one_server_once);
  CHECK(feed(m, event::try_taken) ==
        std::vector{action::give_back_try, action::stop_waiting, action::report_declined});
}

TEST_CASE("redis acquire_machine: a waiter listens once, then tries at each release or retry",
          "[redis][unit]") {
  acquire_machine m = started(one_server_waiter);
  CHECK(feed(m, event::try_taken) == std::vector{action::give_back_try, action::report_waiting,
                                                 action::listen, action::arm_retry});
  CHECK(feed(m, event::channel_released) == std::vector{action::cancel_retry, action::send_try});
  // Taken again: already listening, and the waiting was reported once.
  CHECK(feed(m, event::try_taken) == std::vector{action::give_back_try, action::arm_retry});
  CHECK(feed(m, event::retry_timer) == std::vector{action::send_try});
  CHECK(feed(m, event::try_granted) == std::vector{action::stop_waiting, action::report_granted});
  CHECK_FALSE(m.queued());
}

TEST_CASE("redis acquire_machine: a release heard while a try is in flight is tried again at once",
          "[redis][unit]") {
  acquire_machine m = started(one_server_waiter);
  CHECK(feed(m, event::channel_released).empty());
  CHECK(feed(m, event::try_taken) ==
        std::vector{action::give_back_try, action::report_waiting, action::send_try});
  // The retry at once was spent: the next taken waits, and listens now.
  CHECK(feed(m, event::try_taken) ==
        std::vector{action::give_back_try, action::listen, action::arm_retry});
}

TEST_CASE("redis acquire_machine: a subscription lost mid-wait tries again and listens again",
          "[redis][unit]") {
  acquire_machine m = started(redlock_reader);
  feed(m, event::counters_read);
  feed(m, event::try_taken);
  REQUIRE(m.listening());
  CHECK(feed(m, event::channel_lost) == std::vector{action::cancel_retry, action::read_counters});
  CHECK_FALSE(m.listening());
  feed(m, event::counters_read);
  CHECK(feed(m, event::try_taken) ==
        std::vector{action::give_back_try, action::listen, action::arm_retry});
}

TEST_CASE("redis acquire_machine: a waiter rides out an outage shorter than one expiry",
          "[redis][unit]") {
  SECTION("the first try's failure is reported at once") {
    acquire_machine m = started(one_server_waiter);
    CHECK(feed(m, event::try_unreachable) ==
          std::vector{action::give_back_try, action::stop_waiting, action::withdraw_behind,
                      action::report_failed});
  }
  for (const event fault : {event::try_unreachable, event::counters_unreachable}) {
    SECTION("a later " + std::string(dlock::redis::detail::name_of(fault))) {
      acquire_machine m = started(full_cycle);
      feed(m, event::counters_read);
      feed(m, event::try_taken);
      feed(m, event::retry_timer);
      if (fault == event::try_unreachable) feed(m, event::counters_read);
      const auto retried = feed(m, fault, t0 + 1s);
      CHECK(std::find(retried.begin(), retried.end(), action::arm_outage_retry) != retried.end());
      CHECK_FALSE(m.reported());
      // Still failing just before one expiry since the trouble began, then at it.
      feed(m, event::retry_timer);
      if (fault == event::try_unreachable) feed(m, event::counters_read);
      CHECK_FALSE(m.reported());
      CHECK(list(m.on(fault, t0 + 30s)).back() == action::arm_outage_retry);
      feed(m, event::retry_timer);
      if (fault == event::try_unreachable) feed(m, event::counters_read);
      const auto failed = list(m.on(fault, t0 + 31s));
      CHECK(failed.back() == action::report_failed);
      // Queued on the servers: the failure withdraws behind, without waiting for them.
      CHECK(std::find(failed.begin(), failed.end(), action::withdraw_behind) != failed.end());
    }
  }
  SECTION("an answer in between starts the outage afresh") {
    acquire_machine m = started(one_server_waiter);
    feed(m, event::try_taken);
    feed(m, event::retry_timer);
    feed(m, event::try_unreachable, t0 + 1s);
    feed(m, event::retry_timer);
    feed(m, event::try_taken, t0 + 20s);
    CHECK(m.heard_at() == t0 + 20s);
    feed(m, event::retry_timer);
    CHECK(list(m.on(event::try_unreachable, t0 + 40s)).back() == action::arm_outage_retry);
  }
}

TEST_CASE("redis acquire_machine: a withdrawal during a try waits for its answer, gives back "
          "what it won, then leaves the queue",
          "[redis][unit]") {
  for (const event answer : {event::try_granted, event::try_taken, event::try_unreachable,
                             event::try_refused}) {
    DYNAMIC_SECTION("the try's answer: " << dlock::redis::detail::name_of(answer)) {
      acquire_machine m = started(one_server_waiter);
      CHECK(feed(m, event::withdraw).empty());
      CHECK(feed(m, event::withdraw).empty());  // asked twice: still once
      // A writer's give-back leaves the queue (and its waiting mark) too, however it ended.
      CHECK(feed(m, answer) ==
            std::vector{action::give_back_try, action::stop_waiting, action::withdraw});
      CHECK(m.current() == phase::withdrawing);
      CHECK(feed(m, event::withdraw).empty());  // a stop during the withdrawal
      CHECK(feed(m, event::servers_silent).empty());
      CHECK(feed(m, event::withdrawal_confirmed) == std::vector{action::report_declined});
      CHECK(feed(m, event::withdrawal_confirmed).empty());
    }
  }
  SECTION("a RedLock withdrawal during the counter read proposes nothing") {
    acquire_machine m = started(full_cycle);
    feed(m, event::counters_read);
    feed(m, event::try_taken);
    feed(m, event::retry_timer);
    feed(m, event::withdraw);
    CHECK(feed(m, event::counters_read) == std::vector{action::stop_waiting, action::withdraw});
  }
  SECTION("one that never queued reports at once") {
    acquire_machine m = started(redlock_reader);
    feed(m, event::withdraw);
    CHECK(feed(m, event::counters_read) ==
          std::vector{action::stop_waiting, action::report_declined});
  }
}

TEST_CASE("redis acquire_machine: servers silent during a queued try fail at once and leave the "
          "queue once the try answered",
          "[redis][unit]") {
  for (const event answer : {event::try_granted, event::try_taken, event::try_unreachable,
                             event::try_refused}) {
    DYNAMIC_SECTION("the try's late answer: " << dlock::redis::detail::name_of(answer)) {
      acquire_machine m = started(one_server_waiter);
      // The withdrawal sent now could run before the try (a NOSCRIPT answered by sending the
      // script again), which would then queue the waiter again until its place expired.
      CHECK(feed(m, event::servers_silent) ==
            std::vector{action::stop_waiting, action::report_failed});
      CHECK(feed(m, answer) == std::vector{action::give_back_try, action::withdraw_behind});
      CHECK(feed(m, answer) == std::vector{action::give_back_try});  // withdrawn once
    }
  }
  SECTION("failed while waiting, with no try out, it withdraws behind at once") {
    acquire_machine m = started(one_server_waiter);
    feed(m, event::try_taken);
    CHECK(feed(m, event::servers_silent) ==
          std::vector{action::stop_waiting, action::withdraw_behind, action::report_failed});
  }
}

TEST_CASE("redis acquire_machine: a grant racing a stop is given back, never reported",
          "[redis][unit]") {
  SECTION("while the replicas confirm it") {
    acquire_machine m = started(full_cycle);
    feed(m, event::counters_read);
    feed(m, event::try_granted);
    feed(m, event::withdraw);
    CHECK(feed(m, event::replicas_acknowledged) ==
          std::vector{action::give_back_try, action::stop_waiting, action::withdraw});
  }
  SECTION("arriving after a failure was reported") {
    acquire_machine m = started(one_server_waiter);
    feed(m, event::servers_silent);
    CHECK(feed(m, event::try_granted) ==
          std::vector{action::give_back_try, action::withdraw_behind});
  }
}

TEST_CASE("redis acquire_machine: RedLock keeps a waiter's place when its minority is given "
          "back",
          "[redis][unit]") {
  SECTION("a queued waiter keeps it") {
    acquire_machine m = started(full_cycle);
    feed(m, event::counters_read);
    CHECK(feed(m, event::try_taken).front() == action::give_back_keeping_place);
  }
  SECTION("a reader, never queued, has no place") {
    acquire_machine m = started(redlock_reader);
    feed(m, event::counters_read);
    CHECK(feed(m, event::try_taken).front() == action::give_back_try);
  }
  SECTION("one server's queue has no minority") {
    acquire_machine m = started(one_server_waiter);
    CHECK(feed(m, event::try_taken).front() == action::give_back_try);
  }
}

namespace {

// What a walk through the machine has seen so far, and whether a promise broke: at most one
// report, and reported() says so; nothing after it but a give-back and, with the give-back of
// the try a failure left in flight, the withdrawal of its queue place, once; every try's answer is
// reported as the grant, goes on to the replicas, or is given back; no withdrawal before a try
// was sent; after core's withdrawal no grant is reported, and a withdrawal that waits for the
// servers reports only at their confirmation; the timers and subscriptions stop before every
// report; an action that sends a command whose answer is an event comes last.
struct walk {
  acquire_machine machine;
  int reports = 0;
  int tries = 0;
  bool withdrawn = false;
  bool awaiting_confirmation = false;
  bool stopped = false;
  int withdrawn_after_report = 0;
  bool broken = false;

  void check(std::optional<event> e, const acquire_machine::actions& got) {
    withdrawn |= e == event::withdraw;
    for (const auto a : got) {
      const bool sends = a == action::read_counters || a == action::send_try ||
                         a == action::confirm_with_replicas || a == action::withdraw;
      broken |= sends && a != *(got.end() - 1);
      const bool is_report = a == action::report_granted || a == action::report_declined ||
                             a == action::report_failed;
      // After the report, only what a late answer won may go back, and the queue place of a
      // failure whose try was in flight may be withdrawn with it, once.
      const bool late_withdrawal =
          a == action::withdraw_behind && got.contains(action::give_back_try);
      withdrawn_after_report += reports > 0 && late_withdrawal;
      broken |= reports > 0 && a != action::give_back_try && !late_withdrawal;
      broken |= withdrawn_after_report > 1;
      reports += is_report;
      tries += a == action::send_try;
      broken |= (a == action::withdraw || a == action::withdraw_behind) && tries == 0;
      broken |= a == action::report_granted && withdrawn;
      broken |= is_report && !stopped;
      stopped |= a == action::stop_waiting;
      broken |= a == action::report_declined && awaiting_confirmation &&
                e != event::withdrawal_confirmed;
      awaiting_confirmation |= a == action::withdraw;
    }
    const bool answer = e == event::try_granted || e == event::try_taken ||
                        e == event::try_unreachable || e == event::try_refused ||
                        e == event::replicas_acknowledged || e == event::replicas_missing;
    const bool kept =
        got.contains(action::report_granted) || got.contains(action::confirm_with_replicas);
    const bool given_back =
        got.contains(action::give_back_try) || got.contains(action::give_back_keeping_place);
    broken |= answer && kept == given_back;
    broken |= machine.reported() != (reports > 0) || reports > 1;
  }
};

// The start and `path`, fed again, as text for a failure's message.
std::string trace_of(acquire_machine::shape shape, const std::vector<event>& path) {
  acquire_machine m(shape);
  std::string text = "start -> " + describe(list(m.start(t0)));
  for (const auto e : path) {
    text += ", " + std::string(dlock::redis::detail::name_of(e)) + " -> " + describe(feed(m, e));
  }
  return text;
}

// Feeds every event to a copy of `at`, checks it, and goes on from there until `depth` events;
// a prefix is fed once for all the sequences that share it. Returns the sequences walked.
std::size_t walk_from(const walk& at, acquire_machine::shape shape, std::vector<event>& path,
                      int depth) {
  if (depth == 0) return 1;
  std::size_t sequences = 0;
  for (const auto e : acquire_machine::all_events) {
    walk next = at;
    next.check(e, next.machine.on(e, t0));
    path.push_back(e);
    // One FAIL_CHECK per broken promise, not a CHECK per sequence: a million stay fast.
    if (next.broken && !at.broken) FAIL_CHECK(trace_of(shape, path));
    sequences += walk_from(next, shape, path, depth - 1);
    path.pop_back();
  }
  return sequences;
}

}  // namespace

TEST_CASE("redis acquire_machine: every short sequence of events keeps its promises",
          "[redis][unit]") {
  // Five events take full_cycle from its start through a grant, a withdrawal and its
  // confirmation; the shorter cycles need four.
  std::size_t sequences = 0;
  for (const auto& [shape, length] : {std::pair{full_cycle, 5}, std::pair{one_server_waiter, 4},
                                      std::pair{one_server_once, 4},
                                      std::pair{redlock_reader, 4}}) {
    walk first{.machine = acquire_machine(shape)};
    first.check(std::nullopt, first.machine.start(t0));
    REQUIRE_FALSE(first.broken);
    std::vector<event> path;
    sequences += walk_from(first, shape, path, length);
  }
  CHECK(sequences == 14 * 14 * 14 * 14 * 14 + 3 * 14 * 14 * 14 * 14);
}
