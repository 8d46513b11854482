// Private to the SQL backends: what a backend does for each of sql_wait_machine's actions, so
// that the dispatch of actions (and the order of a report after its session's verdict) is
// written once. PostgreSQL's pooled wait, its wait on the caller's thread and MySQL's wait
// each implement it; the two waits on the io thread through async_sql_wait_io, which also
// holds their machine.
#pragma once

#include <chrono>

#include "sql_wait_machine.hpp"

namespace dlock::detail {

class sql_wait_io {
 public:
  /// Performs `actions`, which `wait` returned, in order; the report they hold, if any, last.
  void perform(const sql_wait_machine& wait, const sql_wait_machine::actions& actions);

 protected:
  ~sql_wait_io() = default;

 private:
  virtual void send_wait() = 0;
  virtual void send_cancel() = 0;
  /// Only with sql_wait_traits::cancel_repeats.
  virtual void arm_cancel_retry(std::chrono::milliseconds) {}
  virtual void arm_answer_timeout() = 0;
  /// Only where the server confirms a cancel (cancel_confirmed).
  virtual void arm_patience() {}
  virtual void abandon_session() = 0;
  virtual void give_back() = 0;
  /// Books the grant the wait answered on its session, for report(report_granted).
  virtual void book_grant() = 0;
  virtual void keep_session() = 0;
  virtual void discard_session() = 0;
  /// Completes the caller with `what` (report_granted, report_declined or report_failed).
  virtual void report(sql_wait_machine::action what) = 0;
};

/// sql_wait_io with the machine it performs, for the waits on the io thread (the pooled waits of
/// both backends), which perform each event as it comes, from a handler or from an action that
/// knows its answer at once. The wait on the caller's thread queues its events instead, and
/// keeps a machine of its own.
class async_sql_wait_io : protected sql_wait_io {
 protected:
  ~async_sql_wait_io() = default;

  /// Starts a wait afresh (MySQL's semaphores wait in slices, each a wait of its own).
  void start_wait(const sql_wait_traits& traits) {
    wait_ = {};
    perform(wait_, wait_.start(traits));
  }

  void feed(sql_wait_machine::event e) { perform(wait_, wait_.on(e)); }

  const sql_wait_machine& wait_machine() const noexcept { return wait_; }

 private:
  sql_wait_machine wait_;
};

}  // namespace dlock::detail
