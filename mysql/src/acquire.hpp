// Private to dlock::mysql: one acquire, from its first attempt to its grant or its end.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>

#include "connection.hpp"
#include "pooled_sql_acquire.hpp"
#include "session.hpp"
#include "sql_wait_machine.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

class mysql_backend;

/// What one connection holds at most once: a name per primitive (every mode and slot of it).
std::string resource_of(const acquire_request& r);
/// Whether `r` is a reader-writer lock's write, which holds every lock of the name.
bool writes(const acquire_request& r);
/// The max_count of the semaphore's live holders when it is not ours (attempt_sql's third
/// column).
std::optional<std::uint64_t> other_max_count(const acquire_request& r, const query_result& result);

/// What an attempt's answer `granting` grants (its slot, then its token): the statement that
/// gives it back, its fencing token, and its entry in a session's books (whose lost signal the
/// lease fills in).
struct granted_hold {
  std::string unlock_sql;
  std::uint64_t token;
  mysql_grant grant;
};
granted_hold granted_by(const acquire_request& r, const statement_settings& settings,
                        const query_result& granting);

/// One acquire: an attempt on a shared connection; then, if it must wait, GET_LOCK with a
/// timeout on a connection of its own (a semaphore waits at one slot for semaphore_retry,
/// then tries them all, and moves on to the next slot).
///
/// Each GET_LOCK is a sql_wait_machine, whose actions this performs. A stop sends KILL QUERY
/// for the waiting statement from another connection, which ends the server's wait at once;
/// the waiting connection then gives back whatever the killed batch took, so that the name is
/// free once the stop is confirmed, and is closed, so that a KILL that lands late leaves
/// nothing behind. Runs on the io thread except cancel().
class mysql_acquire final : public dlock::detail::pooled_sql_acquire<mysql_acquire, mysql_backend,
                                                                     mysql_session, query_result> {
 public:
  mysql_acquire(std::shared_ptr<mysql_backend> backend, acquire_request request,
                acquire_completion done);

  /// Sends the first attempt. Io thread only.
  void start();

 private:
  enum class phase { attempting, waiting, pausing, done };

  void attempted(query_result r);
  std::unique_ptr<lease> booked(const query_result& granting);
  void grant(const query_result& granting);
  void wait();
  void waited(query_result r);
  void pause_before_waiting();
  void stop() override;
  void arm_timer(std::chrono::nanoseconds after, dlock::detail::sql_wait_machine::event then);
  void end_wait();
  // The wait's actions (async_sql_wait_io).
  void send_wait() override;
  void send_cancel() override;
  void arm_answer_timeout() override;
  void arm_patience() override;
  void abandon_session() override;
  void give_back() override;
  void book_grant() override;
  void discard_session() override;
  void report(dlock::detail::sql_wait_machine::action what) override;
  void complete(std::exception_ptr error, std::unique_ptr<lease> granted);

  std::uint32_t next_slot_ = 0;  // where a semaphore waits next
  phase phase_ = phase::attempting;
  boost::asio::steady_timer timer_;
};

}  // namespace dlock::mysql::detail
