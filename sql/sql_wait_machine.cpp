// One SQL wait and its cancel (see sql_wait_machine.hpp).
#include "sql_wait_machine.hpp"

#include <algorithm>
#include <stdexcept>

namespace dlock::detail {

sql_wait_machine::actions sql_wait_machine::start(sql_wait_traits traits) {
  if (phase_ != phase::idle) throw std::logic_error("dlock: a SQL wait started twice");
  traits_ = traits;
  phase_ = phase::waiting;
  actions out;
  out.push(action::send_wait);
  return out;
}

sql_wait_machine::actions sql_wait_machine::on(event e) {
  actions out;
  switch (e) {
    case event::granted:
    case event::not_granted:
    case event::timed_out:
    case event::failed_cleanly:
    case event::failed:
    case event::connection_lost:
      return answered(e);

    case event::stop: return withdraw(withdrawal::stop);
    case event::deadline: return withdraw(withdrawal::deadline);

    case event::nothing_to_cancel:
    case event::cancel_sent:
    case event::cancel_busy:
      return cancel_outcome(e);

    case event::cancel_confirmed:
      // A live server answers a killed wait at once; a batch it killed between two statements
      // may never answer (MariaDB 10.11), so it gets a short patience, not connect_timeout.
      if ((phase_ == phase::cancelling || phase_ == phase::giving_back) && cancel_out_ &&
          !patience_armed_) {
        patience_armed_ = true;
        out.push(action::arm_patience);
      }
      return out;

    case event::cancel_failed:
      return out;  // the answer timeout armed with the cancel still bounds the wait

    case event::cancel_retry_due:
      if (phase_ == phase::cancelling && traits_.cancel_repeats) out.push(action::send_cancel);
      return out;

    case event::patience_elapsed:
      if (patience_armed_ && (phase_ == phase::cancelling || phase_ == phase::giving_back)) {
        return settle(action::discard_session, action::report_declined);
      }
      return out;

    case event::answer_overdue:
      if (answer_timeout_armed_ && phase_ != phase::done) {
        answer_timeout_armed_ = false;
        out.push(action::abandon_session);
      }
      return out;

    case event::server_silent:
      if (phase_ != phase::idle && phase_ != phase::done) {
        return settle(action::discard_session, action::report_failed);
      }
      return out;

    case event::give_up:
      // The caller hears now; closing the session withdraws the wait for good, and with it
      // whatever a cancel that lands late would hit.
      if (phase_ == phase::cancelling) {
        return settle(action::discard_session, action::report_declined);
      }
      return out;

    case event::given_back:
    case event::give_back_failed:
      if (phase_ != phase::giving_back) return out;
      // After a cancel of ours the session is closed even so: the cancel may land late.
      return settle(e == event::given_back && !cancel_out_ ? action::keep_session
                                                           : action::discard_session,
                    action::report_declined);
  }
  return out;
}

sql_wait_machine::actions sql_wait_machine::withdraw(withdrawal why) {
  actions out;
  if (withdrawal_ != withdrawal::none || phase_ == phase::idle || phase_ == phase::done) {
    return out;
  }
  withdrawal_ = why;
  if (phase_ == phase::waiting) {
    if (why == withdrawal::deadline && traits_.deadline_ends_wait) {
      phase_ = phase::expiring;
    } else {
      phase_ = phase::cancelling;
      out.push(action::send_cancel);
      return out;
    }
  }
  arm_answer_timeout_once(out);
  return out;
}

// A server that answers neither the wait, its cancel nor its give-back (paused, unreachable)
// is given up after connect_timeout: it then frees what it granted within its server-side
// lease.
void sql_wait_machine::arm_answer_timeout_once(actions& out) {
  if (answer_timeout_armed_) return;
  answer_timeout_armed_ = true;
  out.push(action::arm_answer_timeout);
}

sql_wait_machine::actions sql_wait_machine::cancel_outcome(event e) {
  actions out;
  if (phase_ != phase::cancelling) return out;
  if (e == event::nothing_to_cancel) {
    // Nothing reached the server, so closing the session withdraws the wait cleanly.
    return cancel_out_ ? out : settle(action::discard_session, action::report_declined);
  }
  if (e == event::cancel_sent) cancel_out_ = true;
  if (traits_.cancel_repeats) {
    cancel_delay_ = next_cancel_delay_;
    next_cancel_delay_ = std::min(next_cancel_delay_ * 2, std::chrono::milliseconds(20));
    out.push(action::arm_cancel_retry);
  }
  arm_answer_timeout_once(out);
  return out;
}

sql_wait_machine::actions sql_wait_machine::answered(event e) {
  actions out;
  switch (phase_) {
    case phase::waiting:
    case phase::expiring:
      return answered_uncancelled(e);
    case phase::cancelling:
      if (!cancel_out_) return answered_uncancelled(e);
      if (e == event::connection_lost) {
        return settle(action::discard_session,
                      stopped() ? action::report_declined : action::report_failed);
      }
      // Whatever it answered, a grant may have won the race with the cancel, and the cancel
      // may still land on the session's next statement.
      if (traits_.give_back_after_cancel) {
        phase_ = phase::giving_back;
        out.push(action::give_back);
        return out;
      }
      return settle(action::discard_session, action::report_declined);
    case phase::idle:
    case phase::giving_back:
    case phase::done:
      break;
  }
  return out;
}

// An answer that no cancel of ours can have touched.
sql_wait_machine::actions sql_wait_machine::answered_uncancelled(event e) {
  actions out;
  switch (e) {
    case event::granted: return settle(action::keep_session, action::report_granted);
    case event::not_granted: return settle(action::keep_session, action::report_declined);
    case event::timed_out:
      // The grant can come between the timeout and the error reaching us, and a session-level
      // lock outlives the failed statement: look for it and let it go.
      phase_ = phase::giving_back;
      out.push(action::give_back);
      return out;
    case event::failed_cleanly: return settle(action::keep_session, action::report_failed);
    case event::failed: return settle(action::discard_session, action::report_failed);
    case event::connection_lost:
      return settle(action::discard_session,
                    stopped() ? action::report_declined : action::report_failed);
    default: return out;
  }
}

sql_wait_machine::actions sql_wait_machine::settle(action verdict, action report) {
  phase_ = phase::done;
  actions out;
  out.push(report);
  out.push(verdict);
  return out;
}

std::string_view name_of(sql_wait_machine::phase p) {
  using phase = sql_wait_machine::phase;
  switch (p) {
    case phase::idle: return "idle";
    case phase::waiting: return "waiting";
    case phase::expiring: return "expiring";
    case phase::cancelling: return "cancelling";
    case phase::giving_back: return "giving_back";
    case phase::done: return "done";
  }
  return "?";
}

std::string_view name_of(sql_wait_machine::event e) {
  using event = sql_wait_machine::event;
  switch (e) {
    case event::granted: return "granted";
    case event::not_granted: return "not_granted";
    case event::timed_out: return "timed_out";
    case event::failed_cleanly: return "failed_cleanly";
    case event::failed: return "failed";
    case event::connection_lost: return "connection_lost";
    case event::stop: return "stop";
    case event::deadline: return "deadline";
    case event::nothing_to_cancel: return "nothing_to_cancel";
    case event::cancel_sent: return "cancel_sent";
    case event::cancel_busy: return "cancel_busy";
    case event::cancel_confirmed: return "cancel_confirmed";
    case event::cancel_failed: return "cancel_failed";
    case event::cancel_retry_due: return "cancel_retry_due";
    case event::patience_elapsed: return "patience_elapsed";
    case event::answer_overdue: return "answer_overdue";
    case event::server_silent: return "server_silent";
    case event::give_up: return "give_up";
    case event::given_back: return "given_back";
    case event::give_back_failed: return "give_back_failed";
  }
  return "?";
}

std::string_view name_of(sql_wait_machine::action a) {
  using action = sql_wait_machine::action;
  switch (a) {
    case action::send_wait: return "send_wait";
    case action::send_cancel: return "send_cancel";
    case action::arm_cancel_retry: return "arm_cancel_retry";
    case action::arm_answer_timeout: return "arm_answer_timeout";
    case action::arm_patience: return "arm_patience";
    case action::abandon_session: return "abandon_session";
    case action::give_back: return "give_back";
    case action::keep_session: return "keep_session";
    case action::discard_session: return "discard_session";
    case action::report_granted: return "report_granted";
    case action::report_declined: return "report_declined";
    case action::report_failed: return "report_failed";
  }
  return "?";
}

}  // namespace dlock::detail
