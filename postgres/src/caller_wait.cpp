// A blocking acquire's wait for a lock on the caller's thread: the same pg_advisory_lock as
// pg_acquire's wait, sent on a caller-driven session that holds nothing, so that the grant
// comes straight to the caller and stays on that session until its release, which the
// releasing thread sends itself. A stop from another thread wakes the wait (an eventfd) and
// cancels the statement as the pooled wait's stop does; core's grace after it (give_up) wakes
// it again to return.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include <dlock/core/errors.hpp>

#include "acquire.hpp"
#include "backend.hpp"
#include "blocking_libpq.hpp"
#include "failure.hpp"
#include "libpq_message.hpp"
#include "lock_timeout.hpp"
#include "sql.hpp"

namespace dlock::postgres::detail {

namespace {

using clock_type = std::chrono::steady_clock;

// How often a wait looks whether the server still answers the keepalive (silent_for_wait).
constexpr auto silence_check = std::chrono::milliseconds(100);

// A descriptor that becomes readable when a stop is requested through either token (while
// it lives); reading it makes it wait for the next.
class stop_wakeup {
 public:
  stop_wakeup(const std::stop_token& withdraw, const std::stop_token& give_up)
      : fd_(withdraw.stop_possible() ? ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1) {
    if (fd_ < 0) return;
    withdraw_callback_.emplace(withdraw, waker{fd_});
    give_up_callback_.emplace(give_up, waker{fd_});
  }
  ~stop_wakeup() {
    withdraw_callback_.reset();  // waits for a callback that runs now
    give_up_callback_.reset();
    if (fd_ >= 0) ::close(fd_);
  }
  stop_wakeup(const stop_wakeup&) = delete;
  stop_wakeup& operator=(const stop_wakeup&) = delete;

  /// -1 when no stop can come.
  int fd() const noexcept { return fd_; }

 private:
  struct waker {
    int fd;
    void operator()() const noexcept {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto written = ::write(fd, &one, sizeof one);
    }
  };
  int fd_;
  std::optional<std::stop_callback<waker>> withdraw_callback_;
  std::optional<std::stop_callback<waker>> give_up_callback_;
};

query_result broken_connection(PGconn* conn) {
  query_result r;
  r.connection_broken = true;
  r.message = libpq_message(PQerrorMessage(conn));
  return r;
}

// Counts the wait in the sessions' books while it runs (the io thread then checks that the
// server still answers).
class wait_counted {
 public:
  explicit wait_counted(caller_sessions& sessions) : sessions_(sessions) {
    sessions_.wait_began();
  }
  ~wait_counted() { sessions_.wait_ended(); }
  wait_counted(const wait_counted&) = delete;
  wait_counted& operator=(const wait_counted&) = delete;

 private:
  caller_sessions& sessions_;
};

}  // namespace

std::unique_ptr<lease> postgres_backend::acquire_waiting_inline(const acquire_request& request,
                                                                std::stop_token stop,
                                                                std::stop_token give_up) {
  // From the start: a stop also ends the opening of a session (a connect takes a fork at the
  // server), which the attempt or the wait may need.
  stop_wakeup wakeup(stop, give_up);
  acquire_request attempt = request;
  attempt.wait = false;
  if (auto granted = attempt_on_caller_session(attempt, wakeup.fd())) return granted;
  if (stop.stop_requested() || clock_type::now() >= request.deadline) return nullptr;
  events().acquire_waiting();
  std::string why;
  auto session = callers_->check_out_for_wait(why, wakeup.fd());
  if (!session && why.empty()) return nullptr;
  if (!session) throw connection_error(message(why, request.name));
  return wait_on_caller_session(request, session, wakeup.fd(), stop, give_up);
}

// The wait itself, on the checked-out `session`: its grant, or nullptr (stopped: `woken_by_stop`
// became readable and `stop` was requested, then `give_up` or the server's confirmation came;
// became readable; timed out), with the session checked in or given up.
std::unique_ptr<lease> postgres_backend::wait_on_caller_session(
    const acquire_request& request, const caller_sessions::session_ptr& session,
    int woken_by_stop, const std::stop_token& stop, const std::stop_token& give_up) {
  const advisory_key key = key_of(request);
  const auto began = clock_type::now();
  wait_counted counted(*callers_);
  PGconn* conn = session->conn;
  auto fail = [&](const query_result& r) -> std::unique_ptr<lease> {
    // A deadlock took nothing; anything else may have left the lock taken: ending the
    // session frees it.
    if (r.sqlstate == "40P01") {
      callers_->check_in(session);
    } else {
      callers_->give_up(session);
    }
    std::rethrow_exception(acquire_failure(*this, r, request.name));
  };
  // On its own, so that the waiter's row is seen while it waits; its failure (the table
  // cannot be written) only leaves the waiter's owner unseen.
  if (auto waiting = record_waiting_sql(request, key, owners_); !waiting.empty()) {
    const query_result r =
        send_blocking(conn, endpoint_, waiting, {},
                      began + std::min(options_.connect_timeout, options_.keepalive));
    if (r.connection_broken) return fail(r);
  }
  const long long timeout_ms =
      request.deadline == clock_type::time_point::max()
          ? 0
          : lock_timeout_ms(request.deadline - clock_type::now());
  const std::string sql =
      record_grant_sql(wait_sql(request, key, timeout_ms, token_expression_), request, key,
                       owners_);
  if (!PQsendQuery(conn, sql.c_str())) return fail(broken_connection(conn));

  std::optional<clock_type::time_point> stopped_at;  // by a stop before the deadline
  bool cancel_sent = false;
  auto next_cancel = clock_type::time_point::max();
  auto cancel_delay = std::chrono::milliseconds(2);
  // A server that does not answer ends the wait by neither lock_timeout nor a cancel: after
  // the deadline, connect_timeout more at most.
  const bool endless =
      request.deadline > clock_type::time_point::max() - options_.connect_timeout;
  const auto give_up_at =
      endless ? clock_type::time_point::max() : request.deadline + options_.connect_timeout;
  auto send_cancel_now = [&] {
    if (send_cancel(conn, cancel_by_control_, session->backend_start, session->cancelling)) {
      cancel_sent = true;
    }
    next_cancel = clock_type::now() + cancel_delay;
    cancel_delay = std::min(cancel_delay * 2, std::chrono::milliseconds(20));
  };
  auto no_answer = [&](const std::string& why) -> std::unique_ptr<lease> {
    callers_->give_up(session);  // its handles (none) lost; the server frees what it took
    throw connection_error(message(why, request.name));
  };

  query_result r;
  while (true) {
    const int flushed = PQflush(conn);
    if (flushed < 0) {
      r = broken_connection(conn);
      break;
    }
    bool answered = false;
    while (flushed == 0 && !PQisBusy(conn)) {
      PGresult* result = PQgetResult(conn);
      if (!result) {
        if (PQstatus(conn) == CONNECTION_BAD) r.connection_broken = true;
        answered = true;
        break;
      }
      add_result(r, result);
    }
    if (answered) break;

    const auto now = clock_type::now();
    if (stopped_at && give_up.stop_requested()) {
      // The server did not confirm the stop within core's grace (a silent one never does): the
      // session is given up, and the server frees what it may still grant once it sees the
      // session closed.
      callers_->give_up(session);
      return nullptr;
    }
    if (now >= give_up_at) {
      return no_answer("no answer within connect_timeout after the deadline");
    }
    if (callers_->silent_for_wait(began)) {
      return no_answer("no answer from the server to a keepalive within one period");
    }
    // A deadline past what lock_timeout can hold is ended by a cancel, as a stop.
    if (!stopped_at && timeout_ms == 0 && now >= request.deadline) {
      stopped_at = now;
      next_cancel = now;
    }
    if (now >= next_cancel) send_cancel_now();
    auto wake_at = std::min({now + silence_check, give_up_at, next_cancel});
    if (timeout_ms == 0) wake_at = std::min(wake_at, request.deadline);

    pollfd fds[2] = {{PQsocket(conn), static_cast<short>(flushed > 0 ? POLLOUT : POLLIN), 0},
                     {woken_by_stop, POLLIN, 0}};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count();
    const int ready = ::poll(fds, 2, static_cast<int>(std::max<long long>(left, 0)));
    if (ready < 0 && errno != EINTR) {
      r = broken_connection(conn);
      break;
    }
    if (ready <= 0) continue;
    // At the deadline the server's lock_timeout ends the wait by itself.
    if (fds[1].revents != 0) {
      std::uint64_t wakeups = 0;  // read, so that give_up wakes the wait again
      [[maybe_unused]] const auto read = ::read(woken_by_stop, &wakeups, sizeof wakeups);
      if (const auto at = clock_type::now(); !stopped_at && stop.stop_requested() &&
                                             at < request.deadline) {
        stopped_at = at;
        send_cancel_now();
      }
    }
    if ((fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0 && !PQconsumeInput(conn)) {
      r = broken_connection(conn);
      break;
    }
  }

  if (cancel_sent || (stopped_at && r.connection_broken)) {
    // The cancel may land after this statement ended, on whatever the session runs next, and
    // a grant may have won the race: ending the session settles both.
    callers_->give_up(session);
    return nullptr;
  }
  if (r.ok()) {
    return grant_on_caller_session(request, key, session, "0",
                                   std::stoull(r.value(1).value_or("0")));
  }
  if (r.sqlstate == "55P03" || r.sqlstate == "57014") {
    return release_granted_in_race(request, key, session);
  }
  return fail(r);
}

// The grant can come between the timeout (or a cancel not ours) and the error reaching us; a
// session-level lock survives the failed statement, so look for it and let it go.
std::unique_ptr<lease> postgres_backend::release_granted_in_race(
    const acquire_request& request, const advisory_key& key,
    const caller_sessions::session_ptr& session) {
  const query_result r = send_blocking(
      session->conn, endpoint_,
      joined(unlock_if_held_sql(request, key), forget_grant_sql(request, key, "0", owners_)), {},
      clock_type::now() + std::min(options_.connect_timeout, options_.keepalive));
  if (r.ok()) {
    callers_->check_in(session);
  } else {
    callers_->give_up(session);  // it may hold the lock: ending it frees it
  }
  return nullptr;
}

}  // namespace dlock::postgres::detail
