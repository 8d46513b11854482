// Private to dlock::postgres: one acquire, from its first attempt to its grant or its end.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/postgres/advisory_key.hpp>

#include "session.hpp"

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
/// A stop cancels the waiting statement (or ends the semaphore's wait); a grant that races a
/// timeout or a cancel is given back, so nothing is left at the server. The caller hears of a
/// stop within 50 ms even from a silent server, while the session settles. Runs on the io
/// thread except cancel().
class pg_acquire final : public acquire_operation,
                         public std::enable_shared_from_this<pg_acquire> {
 public:
  pg_acquire(std::shared_ptr<postgres_backend> backend, acquire_request request,
             acquire_completion done);

  /// Sends the first attempt. Io thread only.
  void start();

  void cancel() noexcept override;

  /// Called by the backend when the semaphore's channel was notified.
  void notified();

 private:
  enum class phase { attempting, waiting, listening, cleaning, done };

  std::string recorded(std::string statement) const;
  void attempted(query_result r, bool on_own_session);
  void give_up_failed_statement(const query_result& r);
  void grant(const std::string& slot, std::uint64_t token);
  void wait_for_lock();
  bool deadline_passed() const;
  long long lock_timeout_ms() const;
  void waited(query_result r);
  void release_granted_in_race();
  void listen();
  void wait_for_notification();
  void attempt_again();
  void end_listening();
  void stop_listening();
  void stop();
  void cancel_again(std::chrono::milliseconds after);
  void complete(std::exception_ptr error, std::unique_ptr<lease> granted);

  std::shared_ptr<postgres_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  advisory_key key_;
  std::string channel_;
  std::shared_ptr<pg_session> session_;
  bool own_session_ = false;
  bool stopped_ = false;
  bool cancel_sent_ = false;
  bool timed_out_ = false;  // stopped at or after the deadline, not by a stop request
  phase phase_ = phase::attempting;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer cancel_timer_;
  std::string resource_;
};

}  // namespace dlock::postgres::detail
