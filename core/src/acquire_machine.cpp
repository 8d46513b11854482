// The phases of one acquire (see acquire_machine.hpp).
#include "acquire_machine.hpp"

#include <stdexcept>

namespace dlock::detail {

using phase = acquire_machine::phase;
using event = acquire_machine::event;
using action = acquire_machine::action;

acquire_machine::actions acquire_machine::start(bool waits, bool stopped) {
  if (phase_ != phase::idle) throw std::logic_error("dlock: an acquire started twice");
  actions out;
  if (stopped) {
    ending_ = ending::stopped;
    return finish_with_answer(phase::done);
  }
  if (waits) {
    phase_ = phase::queued;
    out.push(action::enter_gate);
  } else {
    phase_ = phase::at_backend;
    out.push(action::start_backend);
  }
  return out;
}

acquire_machine::actions acquire_machine::on(event e) {
  actions out;
  switch (e) {
    case event::gate_granted:
      if (phase_ != phase::queued) {
        // Nothing here can use it (a grant handed over after the answer): pass it on.
        out.push(action::leave_gate);
        return out;
      }
      holds_gate_ = true;
      if (ending_ != ending::none) return finish_with_answer(phase::done);
      phase_ = phase::at_backend;
      out.push(action::start_backend);
      return out;

    case event::gate_withdrawn:
      if (phase_ == phase::queued && !holds_gate_) return finish_with_answer(phase::done);
      return out;

    case event::backend_granted:
    case event::backend_declined:
    case event::backend_failed:
      if (phase_ == phase::at_backend || phase_ == phase::withdrawing) {
        return finish_with_answer(phase::done);
      }
      if (phase_ == phase::answered) phase_ = phase::done;
      // A grant nobody waits for any more is given back, whenever it comes.
      if (e == event::backend_granted) out.push(action::give_back);
      return out;

    case event::deadline:
    case event::stop:
      if (phase_ == phase::queued && ending_ == ending::none) {
        note_ending(e == event::stop ? ending::stopped : ending::timed_out);
        out.push(action::withdraw_from_gate);
      } else if (phase_ == phase::at_backend) {
        note_ending(e == event::stop ? ending::stopped : ending::timed_out);
        phase_ = phase::withdrawing;
        out.push(action::withdraw_attempt);
      }
      // Only a stop is answered at the grace. At a deadline the backend's verdict is the
      // answer: a withdrawal its server confirmed is "not obtained", one it cannot confirm
      // (a silent server, found by its keepalive or timeouts) is a connection_error.
      if (e == event::stop && phase_ == phase::withdrawing && !grace_armed_) {
        grace_armed_ = true;
        out.push(action::arm_grace);
      }
      return out;

    case event::grace_elapsed:
      if (phase_ == phase::withdrawing && grace_armed_) return finish_with_answer(phase::answered);
      return out;
  }
  return out;
}

acquire_machine::actions acquire_machine::finish_with_answer(phase next) {
  actions out;
  if (holds_gate_) {
    holds_gate_ = false;
    out.push(action::leave_gate);
  }
  out.push(action::answer);
  answered_ = true;
  phase_ = next;
  return out;
}

void acquire_machine::note_ending(ending why) {
  if (ending_ == ending::none) ending_ = why;
}

std::string_view name_of(phase p) {
  switch (p) {
    case phase::idle: return "idle";
    case phase::queued: return "queued";
    case phase::at_backend: return "at_backend";
    case phase::withdrawing: return "withdrawing";
    case phase::answered: return "answered";
    case phase::done: return "done";
  }
  return "?";
}

std::string_view name_of(event e) {
  switch (e) {
    case event::gate_granted: return "gate_granted";
    case event::gate_withdrawn: return "gate_withdrawn";
    case event::backend_granted: return "backend_granted";
    case event::backend_declined: return "backend_declined";
    case event::backend_failed: return "backend_failed";
    case event::deadline: return "deadline";
    case event::stop: return "stop";
    case event::grace_elapsed: return "grace_elapsed";
  }
  return "?";
}

std::string_view name_of(action a) {
  switch (a) {
    case action::enter_gate: return "enter_gate";
    case action::withdraw_from_gate: return "withdraw_from_gate";
    case action::start_backend: return "start_backend";
    case action::withdraw_attempt: return "withdraw_attempt";
    case action::arm_grace: return "arm_grace";
    case action::leave_gate: return "leave_gate";
    case action::answer: return "answer";
    case action::give_back: return "give_back";
  }
  return "?";
}

}  // namespace dlock::detail
