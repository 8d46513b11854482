// One Redis acquire's try / wait / withdraw cycle (see acquire_machine.hpp).
#include "acquire_machine.hpp"

#include <stdexcept>
#include <utility>

namespace dlock::redis::detail {

acquire_machine::actions acquire_machine::start(clock::time_point now) {
  actions out;
  if (phase_ == phase::done) return out;
  if (phase_ != phase::idle) throw std::logic_error("dlock: a Redis acquire started twice");
  heard_at_ = now;
  if (shape_.waits) out.push(action::watch_contact);
  begin_try(out);
  return out;
}

acquire_machine::actions acquire_machine::on(event e, clock::time_point now) {
  actions out;
  switch (e) {
    case event::counters_read:
    case event::counters_unreachable:
      if (phase_ != phase::reading_counters) return out;
      if (withdraw_asked_) {  // propose nothing
        finish_declined(out);
      } else if (e == event::counters_read) {
        send_try(out);
      } else {
        attempt_failed(out, now);
      }
      return out;

    case event::try_granted:
    case event::try_taken:
    case event::try_unreachable:
    case event::try_refused:
      if (phase_ != phase::trying) {
        // The acquire ended while its try was in flight: what the try won goes back, and a
        // failed waiter's place is withdrawn now that the try can no longer queue it again.
        out.push(action::give_back_try);
        if (std::exchange(withdraw_after_try_, false)) out.push(action::withdraw_behind);
        return out;
      }
      if (withdraw_asked_) {
        out.push(action::give_back_try);
        finish_declined(out);
      } else if (e == event::try_refused) {
        out.push(action::give_back_try);
        finish_failed(out);
      } else if (e == event::try_granted) {
        if (!shape_.confirms_with_replicas) {
          finish_granted(out);
        } else {
          phase_ = phase::confirming;
          out.push(action::confirm_with_replicas);
        }
      } else if (e == event::try_taken) {
        try_not_won(out);
        trouble_since_.reset();
        heard_at_ = now;
        not_granted(out);
      } else {
        try_not_won(out);
        attempt_failed(out, now);
      }
      return out;

    case event::replicas_acknowledged:
    case event::replicas_missing:
      if (phase_ != phase::confirming || withdraw_asked_ || e == event::replicas_missing) {
        out.push(action::give_back_try);
      }
      if (phase_ != phase::confirming) return out;
      if (withdraw_asked_) {
        finish_declined(out);
      } else if (e == event::replicas_acknowledged) {
        finish_granted(out);
      } else {
        finish_failed(out);
      }
      return out;

    case event::channel_released:
    case event::channel_lost:
      // Idle cannot listen yet; withdrawing and done stopped listening.
      if (phase_ == phase::idle || phase_ == phase::withdrawing || phase_ == phase::done) {
        return out;
      }
      if (e == event::channel_lost) listening_ = false;  // listen again at the next wait
      if (in_flight()) {
        retry_at_once_ = true;
      } else {
        out.push(action::cancel_retry);
        begin_try(out);
      }
      return out;

    case event::retry_timer:
      if (phase_ == phase::waiting) begin_try(out);
      return out;

    case event::servers_silent:
      if (phase_ == phase::trying && queued_) {
        // Reported at once, but the queue place is withdrawn once the try has answered, as a
        // stop's is: the try may still run after a withdrawal sent now (a NOSCRIPT answered
        // by sending the script again, a redirect) and queue the waiter again.
        withdraw_after_try_ = true;
        out.push(action::stop_waiting);
        report(out, action::report_failed);
      } else if (in_flight() || phase_ == phase::waiting) {
        finish_failed(out);
      }
      return out;

    case event::withdraw:
      if (phase_ == phase::withdrawing || phase_ == phase::done || withdraw_asked_) return out;
      if (in_flight()) {
        withdraw_asked_ = true;
      } else {
        finish_declined(out);
      }
      return out;

    case event::withdrawal_confirmed:
      if (phase_ == phase::withdrawing) report(out, action::report_declined);
      return out;
  }
  return out;
}

bool acquire_machine::in_flight() const {
  return phase_ == phase::reading_counters || phase_ == phase::trying ||
         phase_ == phase::confirming;
}

void acquire_machine::begin_try(actions& out) {
  retry_at_once_ = false;
  ++attempts_;
  if (shape_.multi_node) {
    phase_ = phase::reading_counters;
    out.push(action::read_counters);
  } else {
    send_try(out);
  }
}

void acquire_machine::send_try(actions& out) {
  phase_ = phase::trying;
  if (shape_.queues) queued_ = true;
  out.push(action::send_try);
}

// A RedLock waiter keeps its place in the queues: its minority is given back, its turn is not
// over (a grant on a server requires being its head, so no one passes it there).
void acquire_machine::try_not_won(actions& out) {
  out.push(queued_ && shape_.multi_node ? action::give_back_keeping_place
                                        : action::give_back_try);
}

void acquire_machine::not_granted(actions& out) {
  phase_ = phase::waiting;
  if (!shape_.waits) return finish_declined(out);
  if (!reported_waiting_) {
    reported_waiting_ = true;
    out.push(action::report_waiting);
  }
  if (retry_at_once_) return begin_try(out);
  if (!listening_) {
    // The next try runs when the subscription is confirmed (channel_released): a release
    // between this try and the subscription would otherwise go unheard.
    listening_ = true;
    out.push(action::listen);
  }
  out.push(action::arm_retry);
}

// A waiting acquire rides out a short outage (a restart, a killed connection) and retries; the
// first attempt, and one that has failed for a whole expiry, report it (and so does
// servers_silent, once nothing was heard for an expiry).
void acquire_machine::attempt_failed(actions& out, clock::time_point now) {
  phase_ = phase::waiting;
  if (!trouble_since_) trouble_since_ = now;
  if (shape_.waits && attempts_ > 1 && now - *trouble_since_ < shape_.expiry) {
    out.push(action::arm_outage_retry);
    return;
  }
  finish_failed(out);
}

void acquire_machine::finish_granted(actions& out) {
  // One server: a granted waiter left the queue in the same script. RedLock: it keeps its place
  // (the grant may have been a minority there) until its release leaves every queue.
  queued_ = false;
  out.push(action::stop_waiting);
  report(out, action::report_granted);
}

// A waiter that queued leaves the queue and reports once the servers confirm (a silent one is
// retried behind): reported at once, a caller that then ends its provider or its process could
// take the connection down before the withdrawal is sent, leaving its place at the head of the
// queue until it expires. Core answers a stopped caller within its grace all the same.
void acquire_machine::finish_declined(actions& out) {
  out.push(action::stop_waiting);
  if (!queued_) return report(out, action::report_declined);
  phase_ = phase::withdrawing;
  out.push(action::withdraw);
}

void acquire_machine::finish_failed(actions& out) {
  out.push(action::stop_waiting);
  if (queued_) out.push(action::withdraw_behind);
  report(out, action::report_failed);
}

void acquire_machine::report(actions& out, action which) {
  phase_ = phase::done;
  reported_ = true;
  out.push(which);
}

std::string_view name_of(acquire_machine::phase p) {
  using phase = acquire_machine::phase;
  switch (p) {
    case phase::idle: return "idle";
    case phase::reading_counters: return "reading_counters";
    case phase::trying: return "trying";
    case phase::confirming: return "confirming";
    case phase::waiting: return "waiting";
    case phase::withdrawing: return "withdrawing";
    case phase::done: return "done";
  }
  return "?";
}

std::string_view name_of(acquire_machine::event e) {
  using event = acquire_machine::event;
  switch (e) {
    case event::counters_read: return "counters_read";
    case event::counters_unreachable: return "counters_unreachable";
    case event::try_granted: return "try_granted";
    case event::try_taken: return "try_taken";
    case event::try_unreachable: return "try_unreachable";
    case event::try_refused: return "try_refused";
    case event::replicas_acknowledged: return "replicas_acknowledged";
    case event::replicas_missing: return "replicas_missing";
    case event::channel_released: return "channel_released";
    case event::channel_lost: return "channel_lost";
    case event::retry_timer: return "retry_timer";
    case event::servers_silent: return "servers_silent";
    case event::withdraw: return "withdraw";
    case event::withdrawal_confirmed: return "withdrawal_confirmed";
  }
  return "?";
}

std::string_view name_of(acquire_machine::action a) {
  using action = acquire_machine::action;
  switch (a) {
    case action::watch_contact: return "watch_contact";
    case action::read_counters: return "read_counters";
    case action::send_try: return "send_try";
    case action::confirm_with_replicas: return "confirm_with_replicas";
    case action::give_back_try: return "give_back_try";
    case action::give_back_keeping_place: return "give_back_keeping_place";
    case action::report_waiting: return "report_waiting";
    case action::listen: return "listen";
    case action::arm_retry: return "arm_retry";
    case action::arm_outage_retry: return "arm_outage_retry";
    case action::cancel_retry: return "cancel_retry";
    case action::stop_waiting: return "stop_waiting";
    case action::withdraw: return "withdraw";
    case action::withdraw_behind: return "withdraw_behind";
    case action::report_granted: return "report_granted";
    case action::report_declined: return "report_declined";
    case action::report_failed: return "report_failed";
  }
  return "?";
}

}  // namespace dlock::redis::detail
