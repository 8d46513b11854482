// Private to dlock::postgres: one acquire, from its first attempt to its grant or its end.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/postgres/advisory_key.hpp>

#include "pg_connection.hpp"
#include "pooled_sql_acquire.hpp"
#include "session.hpp"
#include "sql_wait_machine.hpp"

namespace dlock::postgres::detail {

class postgres_backend;

/// The advisory key an acquire of `request` tries (a semaphore's: the base of its slots).
advisory_key key_of(const acquire_request& request);

/// What a session's books call a grant of `request`: a session never attempts a resource it
/// holds or attempts (advisory locks are re-entrant per session).
std::string resource_of(const acquire_request& request, const advisory_key& key);

/// `statement`, then `then` (when there is one) in the same simple query.
std::string joined(std::string statement, const std::string& then);

/// One acquire: an attempt on a shared session, then, if it must wait, a blocking
/// pg_advisory_lock on a session of its own (locks) or LISTEN and retries (semaphores).
///
/// A lock's wait is a sql_wait_machine, whose actions this performs: a stop cancels the
/// waiting statement; a grant that races a timeout or a cancel is given back, so nothing is
/// left at the server. A stop ends a semaphore's wait. The caller hears of a stop within 50 ms
/// even from a silent server, while the session settles. Runs on the io thread except
/// cancel().
class pg_acquire final : public dlock::detail::pooled_sql_acquire<pg_acquire, postgres_backend,
                                                                  pg_session, query_result> {
 public:
  pg_acquire(std::shared_ptr<postgres_backend> backend, acquire_request request,
             acquire_completion done);

  /// Sends the first attempt. Io thread only.
  void start();

  /// Called by the backend when the semaphore's channel was notified.
  void notified();

 private:
  enum class phase { attempting, waiting, listening, done };

  std::string recorded(std::string statement) const;
  void attempted(query_result r, bool on_own_session);
  void give_up_failed_statement(const query_result& r);
  std::unique_ptr<lease> booked(const std::string& slot, std::uint64_t token);
  void grant(const std::string& slot, std::uint64_t token);
  void wait_for_lock();
  bool deadline_passed() const;
  void waited(query_result r);
  // The wait's actions (async_sql_wait_io).
  void send_wait() override;
  void send_cancel() override;
  void arm_cancel_retry(std::chrono::milliseconds after) override;
  void arm_answer_timeout() override;
  void abandon_session() override;
  void give_back() override;
  void book_grant() override;
  void discard_session() override;
  void report(dlock::detail::sql_wait_machine::action what) override;
  void listen();
  void wait_for_notification();
  void attempt_again();
  void end_listening();
  void stop_listening();
  void stop() override;
  void complete(std::exception_ptr error, std::unique_ptr<lease> granted);

  advisory_key key_;
  std::string channel_;
  bool timed_out_ = false;  // stopped at or after the deadline, not by a stop request
  phase phase_ = phase::attempting;
  long long lock_timeout_ms_ = 0;  // a lock's wait's, from wait_for_lock(); 0: none
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer cancel_timer_;
};

}  // namespace dlock::postgres::detail
