// Private to dlock::redis: one acquire's try / wait / withdraw cycle, as a plain object fed
// events that returns the actions to perform (sans-I/O, like core's acquire_machine and
// Boost.Redis's exec_fsm). acquire.cpp performs the actions on the network thread and feeds the
// events; tests/redis/acquire_machine_test.cpp feeds every event in every phase without a
// server.
//
// A try asks every server at once (RedLock: after reading a majority's fencing counters) and
// try_tally reads their answers into one verdict. Granted: reported, with Sentinel's
// wait_replicas once the replicas have it. Taken: a waiter listens on the name's release
// channel and tries again at a message or when the holder's lease would have run out.
// Unreachable: a waiter rides out an outage shorter than one expiry; a first try, or one whose
// outage lasted, fails. Whatever a try that did not win may hold on a server is given back.
//
// Core asks for a withdrawal at a timeout or a stop (core's acquire_machine.hpp). One asked
// while a try is in flight waits for that try's answer: a reply can come long after the
// withdrawal would have been sent (a NOSCRIPT answered by sending the script, a cluster's
// redirection) and queue the waiter again. A waiter that queued then leaves the queue and
// reports once the servers confirm; a failure reports at once and leaves the queue behind, as
// servers that could not be heard would not confirm either.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string_view>

#include <dlock/core/backend/action_list.hpp>

namespace dlock::redis::detail {

class acquire_machine {
 public:
  using clock = std::chrono::steady_clock;

  /// What kind of acquire runs: fixed by its request and the provider's options.
  struct shape {
    bool waits = false;        ///< tries again until core withdraws it (a nonzero timeout)
    bool multi_node = false;   ///< RedLock: counters are read before each try
    bool queues = false;       ///< a try joins the name's queue of waiters on the servers
    bool confirms_with_replicas = false;  ///< Sentinel's wait_replicas: WAIT before reporting
    std::chrono::nanoseconds expiry{};    ///< the longest outage a waiter rides out
  };

  enum class phase {
    idle,              ///< not started
    reading_counters,  ///< RedLock: the fencing counters are being read
    trying,            ///< a try is in flight
    confirming,        ///< a granted try waits for the replicas' acknowledgement
    waiting,           ///< between tries: for a release message, the holder's lease, a retry
    withdrawing,       ///< reported nothing yet: leaving the queue, until the servers confirm
    done,              ///< reported; a late answer is only given back
  };
  static constexpr std::array all_phases{phase::idle,    phase::reading_counters,
                                         phase::trying,  phase::confirming,
                                         phase::waiting, phase::withdrawing,
                                         phase::done};

  enum class event {
    counters_read,          ///< a majority answered with its fencing counter
    counters_unreachable,   ///< ... or could not
    try_granted,            ///< a try's verdict (try_tally::verdict)
    try_taken,
    try_unreachable,
    try_refused,            ///< wrong_type or other_max_count: the request cannot succeed
    replicas_acknowledged,  ///< enough replicas have the grant, within its validity
    replicas_missing,       ///< ... or not: WAIT failed, too few, or too late
    channel_released,       ///< a release message, or the subscription confirmed
    channel_lost,           ///< a subscription connection dropped
    retry_timer,            ///< the wait between tries is over
    servers_silent,         ///< no quorum heard from for one expiry (a partition)
    withdraw,               ///< core's acquire_operation::cancel()
    withdrawal_confirmed,   ///< the servers answered the withdrawal
  };
  static constexpr std::array all_events{
      event::counters_read,    event::counters_unreachable, event::try_granted,
      event::try_taken,        event::try_unreachable,      event::try_refused,
      event::replicas_acknowledged, event::replicas_missing, event::channel_released,
      event::channel_lost,     event::retry_timer,          event::servers_silent,
      event::withdraw,         event::withdrawal_confirmed};

  enum class action {
    watch_contact,          ///< arm the timer that feeds servers_silent
    read_counters,          ///< RedLock: read the fencing counters on every server
    send_try,               ///< run the acquire script on every server
    confirm_with_replicas,  ///< WAIT for the replicas
    give_back_try,          ///< release what the last try may hold, leaving the queue
    give_back_keeping_place,  ///< ... keeping this RedLock waiter's place in the queues
    report_waiting,         ///< tell the provider's events a waiter waits
    listen,                 ///< subscribe to the release channel on every server
    arm_retry,              ///< feed retry_timer when the holder's lease would run out
    arm_outage_retry,       ///< feed retry_timer soon: the servers could not be reached
    cancel_retry,           ///< the retry timer's wait is moot
    stop_waiting,           ///< cancel the timers and unsubscribe everywhere
    withdraw,               ///< leave the queue; feed withdrawal_confirmed when answered
    withdraw_behind,        ///< leave the queue with nobody waiting for the answer
    report_granted,         ///< complete core's request with the lease
    report_declined,        ///< ... with "not obtained" (taken, or withdrawn)
    report_failed,          ///< ... with the failure of the event just fed
  };

  /// What one event asks for, in order.
  using actions = dlock::action_list<action, 6>;

  explicit acquire_machine(shape s) : shape_(s) {}

  /// Begins at `now`: the first try (RedLock: its counter read). A machine already done (core
  /// withdrew before the start ran) does nothing. Throws std::logic_error when started twice.
  actions start(clock::time_point now);
  /// Feeds `e`, which happened at `now`. An event that means nothing in the current phase (a
  /// stale timer, a message after the report) returns no action, or only a give-back.
  actions on(event e, clock::time_point now);

  phase current() const { return phase_; }
  /// True once a report_* action was returned; one is returned at most once.
  bool reported() const { return reported_; }
  /// In a queue of waiters on the servers (a try queued, and no grant took it out).
  bool queued() const { return queued_; }
  /// Nothing more to try: reported, or leaving the queue before its report.
  bool finished() const { return phase_ == phase::withdrawing || phase_ == phase::done; }
  /// Subscribed (or subscribing) to the release channel.
  bool listening() const { return listening_; }
  /// When a quorum last answered a try (or the acquire began): the base of servers_silent.
  clock::time_point heard_at() const { return heard_at_; }

 private:
  void begin_try(actions& out);
  void send_try(actions& out);
  void try_not_won(actions& out);
  void not_granted(actions& out);
  void attempt_failed(actions& out, clock::time_point now);
  void finish_granted(actions& out);
  void finish_declined(actions& out);
  void finish_failed(actions& out);
  void report(actions& out, action which);
  bool in_flight() const;

  shape shape_;
  phase phase_ = phase::idle;
  bool withdraw_asked_ = false;  ///< core withdrew while a try was in flight
  bool retry_at_once_ = false;   ///< a channel event came during the try: it may have missed it
  bool listening_ = false;
  bool queued_ = false;
  bool withdraw_after_try_ = false;  ///< failed while a queued try was in flight
  bool reported_waiting_ = false;
  bool reported_ = false;
  int attempts_ = 0;
  clock::time_point heard_at_{};
  std::optional<clock::time_point> trouble_since_;
};

std::string_view name_of(acquire_machine::phase p);
std::string_view name_of(acquire_machine::event e);
std::string_view name_of(acquire_machine::action a);

}  // namespace dlock::redis::detail
