// Private to the SQL backends (dlock::postgres and dlock::mysql): one blocking wait statement
// and its cancel, as a plain object fed events that returns the actions to perform (sans-I/O,
// as core's acquire_machine). PostgreSQL's pooled wait (postgres/src/acquire.cpp), its wait on
// the caller's thread (postgres/src/caller_wait.cpp) and MySQL's GET_LOCK wait
// (mysql/src/acquire.cpp) only perform the actions and feed the events; unit tests feed every
// event in every phase without a server (tests/unit/sql_wait_machine_test.cpp).
//
// It lives in sql/, compiled once and linked into both backends as objects, rather than in
// core's installed kit (core/include/dlock/core/backend/): only a server that runs a wait as a
// statement and cancels it from outside needs it, and a private header may change with them.
//
// The life of a wait: the statement is sent. It answers (granted; not granted; ended by the
// server's timeout or a cancel; failed; the connection lost), or core withdraws the acquire
// (a stop before the deadline, or the deadline). A withdrawal cancels the statement out of
// band (PQcancel / pg_cancel_backend, KILL QUERY), unless the server's own timeout ends it at
// the deadline anyway. Then the wait settles, and the session is kept for the next statement
// or discarded. Its rules:
// - a grant the wait answers is reported, unless a cancel of ours went out: a cancel may land
//   late, on whatever the session runs next, so that session is discarded (which frees all it
//   holds, the grant too), after giving back what the statement took where the server frees a
//   closed session's locks only later (MySQL);
// - a session whose state is unknown (a failed statement, a cancel sent, a give-back that
//   failed) is never kept;
// - a lost connection is a failure ("could not be heard"), never "not obtained", except after
//   a stop, whose caller asked for nothing more; a server silent to the keepalive is always one;
// - a server that answers nothing is abandoned after connect_timeout, a killed batch that never
//   answers is closed after a short patience, and a wait on the caller's thread gives up at
//   core's grace after a stop: no wait outlives its bounds;
// - exactly one report, with exactly one verdict on the session beside it.
#pragma once

#include <array>
#include <chrono>
#include <string_view>

#include <dlock/core/backend/action_list.hpp>

namespace dlock::detail {

/// What differs between the servers, fixed when a wait starts.
struct sql_wait_traits {
  /// The server ends the wait by itself at the deadline (PostgreSQL's lock_timeout), so a
  /// withdrawal at the deadline cancels nothing and awaits its answer.
  bool deadline_ends_wait = false;
  /// The server drops a cancel that reaches it before it has read the statement
  /// (PostgreSQL's): send it again until the wait answers. Else one cancel (MySQL's KILL
  /// QUERY, which the server confirms).
  bool cancel_repeats = false;
  /// After a cancelled wait answers, the session gives back what the statement took before it
  /// is discarded: the server frees a closed session's locks only once its thread notices,
  /// possibly after the caller heard (MySQL).
  bool give_back_after_cancel = false;
};

class sql_wait_machine {
 public:
  enum class phase {
    idle,         ///< not started
    waiting,      ///< the wait statement is out; nothing asked of it
    expiring,     ///< withdrawn at the deadline; the server's own timeout ends it
    cancelling,   ///< withdrawn; the cancel is on its way, the answer awaited
    giving_back,  ///< the wait ended, maybe with a grant; a statement gives back what it took
    done,         ///< reported, and the session kept or discarded
  };
  static constexpr std::array all_phases{phase::idle,      phase::waiting,     phase::expiring,
                                         phase::cancelling, phase::giving_back, phase::done};

  enum class event {
    granted,            ///< the wait answered with the lock
    not_granted,        ///< ... without it (GET_LOCK's 0)
    timed_out,          ///< ... failed as timed out or cancelled (55P03, 57014): maybe granted
    failed_cleanly,     ///< ... failed having taken nothing (a deadlock, a refused semaphore)
    failed,             ///< ... failed, maybe after taking the lock
    connection_lost,    ///< ... came as a broken connection: the server frees all it held
    stop,               ///< core withdraws before the deadline
    deadline,           ///< core withdraws at the deadline (or the caller's thread saw it pass)
    nothing_to_cancel,  ///< the statement has not reached the server yet (still connecting)
    cancel_sent,        ///< a cancel request went out
    cancel_busy,        ///< none went out: an earlier one is still on its way
    cancel_confirmed,   ///< the server answered the cancel: the wait's answer is due
    cancel_failed,      ///< the server refused the cancel
    cancel_retry_due,   ///< the time armed by arm_cancel_retry passed
    patience_elapsed,   ///< the time armed by arm_patience passed
    answer_overdue,     ///< the time armed by arm_answer_timeout passed
    server_silent,      ///< the server answered no keepalive for a whole period
    give_up,            ///< core's grace after a stop passed (a wait on the caller's thread)
    given_back,         ///< the give-back statement succeeded
    give_back_failed,   ///< ... failed, or its connection was lost
  };
  static constexpr std::array all_events{
      event::granted,          event::not_granted,     event::timed_out,
      event::failed_cleanly,   event::failed,          event::connection_lost,
      event::stop,             event::deadline,        event::nothing_to_cancel,
      event::cancel_sent,      event::cancel_busy,     event::cancel_confirmed,
      event::cancel_failed,    event::cancel_retry_due, event::patience_elapsed,
      event::answer_overdue,   event::server_silent,   event::give_up,
      event::given_back,       event::give_back_failed};

  enum class action {
    send_wait,           ///< send the wait statement
    send_cancel,         ///< cancel it out of band; feed how (cancel_sent, cancel_busy, ...)
    arm_cancel_retry,    ///< feed cancel_retry_due after cancel_retry_delay()
    arm_answer_timeout,  ///< feed answer_overdue after connect_timeout
    arm_patience,        ///< feed patience_elapsed after the killed batch's patience
    abandon_session,     ///< end the session as broken; its answer comes as connection_lost
    give_back,           ///< send the statement that frees what the wait may have taken
    report_granted,      ///< the caller gets the lock (book it on the session now)
    report_declined,     ///< ... "not obtained"
    report_failed,       ///< ... the error (from the last answer, or the silence)
    keep_session,        ///< the session is clean: back to its pool
    discard_session,     ///< close it: the server frees whatever it holds
  };

  /// What one event asks for, in order: at most three actions. A report comes with its
  /// verdict on the session right after it: the backend books a grant first (a pool may close
  /// a kept session that holds nothing), and completes the caller once the verdict is carried
  /// out, so that the next acquire finds the session free (sql_wait_io does both).
  using actions = dlock::action_list<action, 3>;

  /// Begins, once: returns send_wait. Throws std::logic_error when not idle.
  actions start(sql_wait_traits traits);
  /// Feeds `e`. An event that means nothing in the current phase (a second stop, a late
  /// timer, an answer after the report) returns no action.
  actions on(event e);

  phase current() const { return phase_; }
  /// True once a stop (not the deadline) withdrew the wait first.
  bool stopped() const { return withdrawal_ == withdrawal::stop; }
  /// True once the deadline withdrew the wait first.
  bool expired() const { return withdrawal_ == withdrawal::deadline; }
  /// How long after this cancel to send the next: 2 ms, doubling up to 20 ms.
  std::chrono::milliseconds cancel_retry_delay() const { return cancel_delay_; }

 private:
  enum class withdrawal { none, stop, deadline };

  actions withdraw(withdrawal why);
  actions cancel_outcome(event e);
  actions answered(event e);
  actions answered_uncancelled(event e);
  actions settle(action verdict, action report);
  void arm_answer_timeout_once(actions& out);

  phase phase_ = phase::idle;
  sql_wait_traits traits_{};
  withdrawal withdrawal_ = withdrawal::none;  // the first of a stop and the deadline
  bool cancel_out_ = false;            // a cancel request went out
  bool answer_timeout_armed_ = false;
  bool patience_armed_ = false;
  std::chrono::milliseconds cancel_delay_{0};
  std::chrono::milliseconds next_cancel_delay_{2};
};

std::string_view name_of(sql_wait_machine::phase p);
std::string_view name_of(sql_wait_machine::event e);
std::string_view name_of(sql_wait_machine::action a);

}  // namespace dlock::detail
