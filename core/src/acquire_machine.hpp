// Private to core: the phases of one acquire, as a plain object fed events that returns the
// actions to perform (sans-I/O, as Boost.Redis's exec_fsm). acquire_op performs the actions
// on its strand and feeds the events; unit tests feed every event in every phase without a
// server (tests/unit/acquire_machine_test.cpp).
//
// This is where stopping an acquire lives, once for every backend. A timeout or a stop request
// asks the backend to withdraw its attempt. After a stop the caller hears as soon as the
// backend confirms, or after stop_grace at most (a silent or partitioned server never
// confirms), while the withdrawal goes on behind. After a timeout the caller hears the
// backend's verdict: "not obtained" once the server confirmed, a connection_error when the
// backend finds it silent (never a silent "not obtained" from a server that could not be
// heard). A grant that the backend reports after the caller heard is given back. A backend
// only withdraws and reports how its attempt ended.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

#include <dlock/core/backend/action_list.hpp>

namespace dlock::detail {

/// How long a stopped acquire waits for its backend to confirm the withdrawal before the caller
/// hears. The contract answers a stop well under 100 ms (DESIGN.md, "Acquire semantics") and
/// leaves nothing on the server; a live server confirms within milliseconds. 40 ms leaves more
/// than half of the 100 ms to a loaded machine's scheduling, which under the sanitizers on a
/// busy CI runner takes tens of milliseconds.
inline constexpr std::chrono::milliseconds stop_grace{40};

/// How an acquire that got no lock ended.
enum class ending { none, timed_out, stopped };

class acquire_machine {
 public:
  enum class phase {
    idle,         ///< not started
    queued,       ///< waits for the name's local gate
    at_backend,   ///< the backend's attempt runs
    withdrawing,  ///< asked the backend to withdraw; after a stop, the caller waits up to stop_grace
    answered,     ///< the caller heard; the backend's withdrawal is still settling
    done,         ///< nothing more to do
  };
  static constexpr std::array all_phases{phase::idle,        phase::queued,
                                         phase::at_backend,  phase::withdrawing,
                                         phase::answered,    phase::done};

  enum class event {
    gate_granted,      ///< the local gate is ours (at once, or handed over by the one before)
    gate_withdrawn,    ///< withdraw_from_gate found us queued and took us out
    backend_granted,   ///< the backend's attempt ended with a grant
    backend_declined,  ///< ... ended with nothing (taken, or withdrawn)
    backend_failed,    ///< ... ended with an error
    deadline,          ///< the timeout passed
    stop,              ///< a stop was requested
    grace_elapsed,     ///< stop_grace passed since the withdrawal was asked
  };
  static constexpr std::array all_events{
      event::gate_granted,     event::gate_withdrawn, event::backend_granted,
      event::backend_declined, event::backend_failed, event::deadline,
      event::stop,             event::grace_elapsed};

  enum class action {
    enter_gate,          ///< join the local gate's queue (feed gate_granted if entered at once)
    withdraw_from_gate,  ///< leave the gate's queue (feed gate_withdrawn if we were in it)
    start_backend,       ///< begin the backend's attempt
    withdraw_attempt,    ///< acquire_operation::cancel()
    arm_grace,           ///< feed grace_elapsed after stop_grace
    leave_gate,          ///< hand the gate to the next local acquire
    answer,              ///< complete the caller: the grant, the error, or "not obtained"
    give_back,           ///< release the grant the backend reported after the caller heard
  };

  /// What one event asks for, in order. At most four actions follow from one event.
  using actions = action_list<action, 4>;

  /// Begins, once: `waits` queues at the local gate first (a zero timeout makes one attempt
  /// and skips the gate); `stopped` is a stop requested before the start.
  /// Throws std::logic_error when not idle.
  actions start(bool waits, bool stopped);
  /// Feeds `e`. An event that means nothing in the current phase (a stop while the caller
  /// already heard, a late timer) returns no action.
  actions on(event e);

  phase current() const { return phase_; }
  ending why_not() const { return ending_; }
  /// True once `answer` was returned; it is returned exactly once.
  bool answered() const { return answered_; }

 private:
  actions finish_with_answer(phase next);
  void note_ending(ending why);

  phase phase_ = phase::idle;
  ending ending_ = ending::none;
  bool holds_gate_ = false;
  bool grace_armed_ = false;
  bool answered_ = false;
};

std::string_view name_of(acquire_machine::phase p);
std::string_view name_of(acquire_machine::event e);
std::string_view name_of(acquire_machine::action a);

}  // namespace dlock::detail
