// A blocking acquire's wait for a lock on the caller's thread: the same pg_advisory_lock as
// pg_acquire's wait, sent on a caller-driven session that holds nothing, so that the grant
// comes straight to the caller and stays on that session until its release, which the
// releasing thread sends itself. The wait follows the same sql_wait_machine as the pooled one;
// this performs its actions with libpq driven from the caller's thread. A stop from another
// thread wakes the wait (an eventfd) and the machine cancels the statement; core's grace after
// it (give_up) wakes it again to return.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include <dlock/core/errors.hpp>

#include "acquire.hpp"
#include "backend.hpp"
#include "blocking_libpq.hpp"
#include "failure.hpp"
#include "libpq_message.hpp"
#include "lock_timeout.hpp"
#include "sql.hpp"
#include "sql_wait_io.hpp"
#include "sql_wait_machine.hpp"
#include "wait_answer.hpp"

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

// The wait itself, on the checked-out `session`, as sql_wait_machine says: its grant, or
// nullptr (stopped: `woken_by_stop` became readable and `stop` was requested, then `give_up` or
// the server's confirmation came; timed out), with the session checked in or given up.
std::unique_ptr<lease> postgres_backend::wait_on_caller_session(
    const acquire_request& request, const caller_sessions::session_ptr& session,
    int woken_by_stop, const std::stop_token& stop, const std::stop_token& give_up) {
  using event = dlock::detail::sql_wait_machine::event;
  const advisory_key key = key_of(request);
  const auto began = clock_type::now();
  caller_sessions::counted_wait counted(*callers_);
  PGconn* conn = session->conn;
  const long long timeout_ms =
      request.deadline == clock_type::time_point::max()
          ? 0
          : lock_timeout_ms(request.deadline - clock_type::now());

  // The machine's actions, performed on this thread; what they answer is fed back at once.
  struct caller_wait_io final : dlock::detail::sql_wait_io {
    postgres_backend& backend;
    const acquire_request& request;
    const advisory_key& key;
    const caller_sessions::session_ptr& session;
    long long timeout_ms;
    dlock::detail::sql_wait_machine wait;
    query_result r;  // the answer, or why there is none
    std::unique_ptr<lease> granted;
    std::exception_ptr error;
    bool reported = false;
    clock_type::time_point next_cancel = clock_type::time_point::max();
    clock_type::time_point answer_due = clock_type::time_point::max();
    clock_type::time_point wait_sent{};
    std::vector<event> answers;  // of the actions performed, to feed

    caller_wait_io(postgres_backend& backend, const acquire_request& request,
                const advisory_key& key, const caller_sessions::session_ptr& session,
                long long timeout_ms)
        : backend(backend), request(request), key(key), session(session),
          timeout_ms(timeout_ms) {}

    void start() {
      perform(wait,
              wait.start({.deadline_ends_wait = timeout_ms != 0, .cancel_repeats = true}));
      drain();
    }
    void feed(event e) {
      answers.push_back(e);
      drain();
    }
    void drain() {
      while (!answers.empty() && !reported) {
        const event next = answers.back();
        answers.pop_back();
        perform(wait, wait.on(next));
      }
    }
    void no_answer(const std::string& why) {
      r = query_result{};
      r.connection_broken = true;
      r.message = why;
    }

    void send_wait() override {
      wait_sent = clock_type::now();
      if (!backend.send_caller_wait(request, key, session->conn, timeout_ms, r)) {
        answers.push_back(event::connection_lost);
      }
    }
    void send_cancel() override {
      answers.push_back(postgres::detail::send_cancel(session->conn, backend.cancel_by_control_,
                                                      session->extras.backend_start,
                                                      session->extras.cancelling)
                            ? event::cancel_sent
                            : event::cancel_busy);
    }
    void arm_cancel_retry(std::chrono::milliseconds after) override {
      next_cancel = clock_type::now() + after;
    }
    void arm_answer_timeout() override {
      answer_due =
          std::min(answer_due, clock_type::now() + backend.options_.connect_timeout);
    }
    void abandon_session() override {
      no_answer(wait.expired() ? "no answer within connect_timeout after the deadline"
                               : "no answer within connect_timeout after a stop");
      answers.push_back(event::connection_lost);
    }
    void give_back() override {
      answers.push_back(backend.give_back_granted_in_race(request, key, session)
                            ? event::given_back
                            : event::give_back_failed);
    }
    void book_grant() override {
      granted = backend.grant_on_caller_session(
          request, key, session, "0", std::stoull(r.value(1).value_or("0")),
          backend.callers_->validity_of_grant(*session, wait_sent, true));
    }
    void keep_session() override {
      if (!granted) backend.callers_->check_in(session);  // a grant went back checked in
    }
    // The server frees what the session held once it sees it closed, and a cancel that lands
    // late has nothing left to hit.
    void discard_session() override { backend.callers_->give_up(session); }
    void report(dlock::detail::sql_wait_machine::action what) override {
      if (what == dlock::detail::sql_wait_machine::action::report_failed) {
        error = acquire_failure(backend, r, request.name);
      }
      reported = true;
    }
  } io(*this, request, key, session, timeout_ms);
  io.start();

  while (!io.reported) {
    const int flushed = PQflush(conn);
    if (flushed < 0) {
      io.r = broken_connection(conn);
      io.feed(event::connection_lost);
      continue;
    }
    bool answered = false;
    while (flushed == 0 && !PQisBusy(conn)) {
      PGresult* result = PQgetResult(conn);
      if (!result) {
        if (PQstatus(conn) == CONNECTION_BAD) io.r.connection_broken = true;
        answered = true;
        break;
      }
      add_result(io.r, result);
    }
    if (answered) {
      io.feed(wait_answer(io.r));
      continue;
    }

    const auto now = clock_type::now();
    // The server did not confirm a stop within core's grace (a silent one never does): the
    // session is given up, and the server frees what it may still grant once it sees it closed.
    if (give_up.stop_requested()) io.feed(event::give_up);
    if (!io.reported && now >= io.answer_due) io.feed(event::answer_overdue);
    if (!io.reported && callers_->silent_for_wait(began)) {
      io.no_answer("no answer from the server to a keepalive within one period");
      io.feed(event::server_silent);
    }
    // At the deadline the server's lock_timeout ends the wait by itself; a deadline past what
    // lock_timeout can hold is ended by a cancel, as a stop.
    if (!io.reported && now >= request.deadline) io.feed(event::deadline);
    if (!io.reported && now >= io.next_cancel) {
      io.next_cancel = clock_type::time_point::max();
      io.feed(event::cancel_retry_due);
    }
    if (io.reported) break;
    auto wake_at = std::min({now + silence_check, io.answer_due, io.next_cancel});
    if (now < request.deadline) wake_at = std::min(wake_at, request.deadline);

    pollfd fds[2] = {{PQsocket(conn), static_cast<short>(flushed > 0 ? POLLOUT : POLLIN), 0},
                     {woken_by_stop, POLLIN, 0}};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count();
    const int ready = ::poll(fds, 2, static_cast<int>(std::max<long long>(left, 0)));
    if (ready < 0 && errno != EINTR) {
      io.r = broken_connection(conn);
      io.feed(event::connection_lost);
      continue;
    }
    if (ready <= 0) continue;
    if (fds[1].revents != 0) {
      std::uint64_t wakeups = 0;  // read, so that give_up wakes the wait again
      [[maybe_unused]] const auto read = ::read(woken_by_stop, &wakeups, sizeof wakeups);
      if (stop.stop_requested()) {
        io.feed(clock_type::now() < request.deadline ? event::stop : event::deadline);
      }
    }
    if ((fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0 && !PQconsumeInput(conn)) {
      io.r = broken_connection(conn);
      io.feed(event::connection_lost);
    }
  }
  if (io.error) std::rethrow_exception(io.error);
  return std::move(io.granted);
}

// Sends the wait, after the row that shows its owner waiting where owners are kept; false,
// with why in `broken`, when the session broke.
bool postgres_backend::send_caller_wait(const acquire_request& request, const advisory_key& key,
                                        PGconn* conn, long long timeout_ms, query_result& broken) {
  // On its own, so that the waiter's row is seen while it waits; its failure (the table
  // cannot be written) only leaves the waiter's owner unseen.
  if (auto waiting = record_waiting_sql(request, key, owners_); !waiting.empty()) {
    query_result r =
        send_blocking(conn, endpoint_, waiting, {},
                      clock_type::now() + std::min(options_.connect_timeout, options_.keepalive));
    if (r.connection_broken) {
      broken = std::move(r);
      return false;
    }
  }
  const std::string sql = record_grant_sql(wait_sql(request, key, timeout_ms, token_expression_),
                                           request, key, owners_);
  if (!PQsendQuery(conn, sql.c_str())) {
    broken = broken_connection(conn);
    return false;
  }
  return true;
}

// The grant can come between the timeout (or a cancel not ours) and the error reaching us; a
// session-level lock survives the failed statement, so look for it and let it go. True when
// the session is clean.
bool postgres_backend::give_back_granted_in_race(const acquire_request& request,
                                                 const advisory_key& key,
                                                 const caller_sessions::session_ptr& session) {
  return send_blocking(
             session->conn, endpoint_,
             joined(unlock_if_held_sql(request, key), forget_grant_sql(request, key, "0", owners_)),
             {}, clock_type::now() + std::min(options_.connect_timeout, options_.keepalive))
      .ok();
}

}  // namespace dlock::postgres::detail
