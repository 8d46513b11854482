#include "acquire.hpp"

#include <algorithm>
#include <stdexcept>

#include "backend.hpp"
#include "election_key.hpp"
#include "failure.hpp"
#include "lock_timeout.hpp"
#include "semaphore_keys.hpp"
#include "sql.hpp"
#include "upgrade_gate_key.hpp"
#include "wait_answer.hpp"

namespace dlock::postgres::detail {

namespace {

bool is_semaphore(const acquire_request& request) {
  return request.kind == resource_kind::semaphore;
}

}  // namespace

// A lock and a reader-writer lock of a name share its key (as in .NET's DistributedLock);
// a semaphore's slots, the upgrade gate and the election have keys of their own.
advisory_key key_of(const acquire_request& request) {
  switch (request.kind) {
    case resource_kind::semaphore: return semaphore_base(request.name);
    case resource_kind::upgrade_gate: return upgrade_gate_key(request.name);
    case resource_kind::lock:
    case resource_kind::reader_writer_lock: break;
    case resource_kind::election: return election_key(request.name);
  }
  return advisory_key::from_name(request.name);
}

std::string resource_of(const acquire_request& request, const advisory_key& key) {
  return is_semaphore(request) ? "S" + channel_of(request.name) : "L" + key.sql_arguments();
}

std::string joined(std::string statement, const std::string& then) {
  return then.empty() ? statement : statement + "; " + then;
}

pg_acquire::pg_acquire(std::shared_ptr<postgres_backend> backend, acquire_request request,
                       acquire_completion done)
    : pooled_sql_acquire(std::move(backend), std::move(request), std::move(done)),
      key_(key_of(request_)),
      channel_(is_semaphore(request_) ? channel_of(request_.name) : std::string()),
      retry_timer_(backend_->executor()),
      cancel_timer_(backend_->executor()) {
  resource_ = resource_of(request_, key_);
}

void pg_acquire::start() {
  session_ = backend_->sessions().session_for_attempt(resource_);
  session_->attempting.insert(resource_);
  session_->connection->execute(
      recorded(attempt_sql(request_, key_, backend_->token_expression())),
      [self = shared_from_this()](query_result r) {
        // Answered: from here the grant (if any) is in the books, or the session is free of it.
        auto& attempting = self->session_->attempting;
        attempting.erase(attempting.find(self->resource_));
        self->attempted(std::move(r), false);
      });
}

// The statement that also records the grant it makes (sql.hpp), in one transaction.
std::string pg_acquire::recorded(std::string statement) const {
  return record_grant_sql(statement, request_, key_, backend_->owners());
}

// A statement that failed after its lock was taken (the fencing sequence or the owners' table
// missing or not granted) leaves the session-level lock held: ending the session frees it.
// Other grants on a shared session go with it (marked lost), as with any broken session.
void pg_acquire::give_up_failed_statement(const query_result& r) {
  if (r.connection_broken || r.sqlstate == "40P01") return;  // a deadlock took nothing
  session_->connection->abandon("a lock statement failed (" + r.message +
                                "): the session may hold what it took");
}

void pg_acquire::notified() {
  if (phase_ == phase::listening) attempt_again();
}

// The first column names the slot (semaphores), the second is the token; NULL: not granted.
// A semaphore's third is the max_count of other holders, when it is not ours.
void pg_acquire::attempted(query_result r, bool on_own_session) {
  if (!r.ok()) {
    if (on_own_session) stop_listening();
    give_up_failed_statement(r);
    complete(acquire_failure(*backend_, r, request_.name), nullptr);
    return;
  }
  if (auto token = r.value(1)) {
    if (on_own_session) end_listening();
    grant(*r.value(0), std::stoull(*token));
    return;
  }
  if (auto other = is_semaphore(request_) ? r.value(2) : std::nullopt) {
    if (on_own_session) stop_listening();
    complete(std::make_exception_ptr(backend_->max_count_mismatch(request_, std::stoull(*other))),
             nullptr);
    return;
  }
  if (stopped_ || !request_.wait) {
    if (on_own_session) stop_listening();
    complete(nullptr, nullptr);
    return;
  }
  if (is_semaphore(request_)) {
    if (!on_own_session) {
      backend_->events().acquire_waiting();
      listen();
    } else {
      wait_for_notification();
    }
    return;
  }
  backend_->events().acquire_waiting();
  wait_for_lock();
}

std::unique_ptr<lease> pg_acquire::booked(const std::string& slot, std::uint64_t token) {
  auto granted = std::make_unique<pg_lease>(
      backend_, session_, request_.name,
      joined(unlock_sql(request_, key_, slot),
             forget_grant_sql(request_, key_, slot, backend_->owners())),
      token, grant_validity_now());
  granted->attach(backend_->sessions().add_grant(*session_, {resource_, granted->lost_signal()}));
  return granted;
}

void pg_acquire::grant(const std::string& slot, std::uint64_t token) {
  auto granted = booked(slot, token);
  if (own_session_) backend_->sessions().unreserve(session_);
  complete(nullptr, std::move(granted));
}

// Locks: a blocking pg_advisory_lock on a session that holds nothing, bounded by
// lock_timeout at the deadline, which then needs no cancel.
void pg_acquire::wait_for_lock() {
  session_ = backend_->sessions().session_for_wait();
  own_session_ = true;
  phase_ = phase::waiting;
  if (request_.deadline != std::chrono::steady_clock::time_point::max()) {
    lock_timeout_ms_ = lock_timeout_ms(request_.deadline - std::chrono::steady_clock::now());
  }
  start_wait({.deadline_ends_wait = lock_timeout_ms_ != 0, .cancel_repeats = true});
}

// At the deadline the server's lock_timeout ends the wait by itself, sooner than a
// cancel request, which opens a connection of its own.
bool pg_acquire::deadline_passed() const {
  return request_.deadline != std::chrono::steady_clock::time_point::max() &&
         std::chrono::steady_clock::now() >= request_.deadline;
}

void pg_acquire::send_wait() {
  // On its own, so that the waiter's row is seen while it waits; its failure (the table
  // cannot be written) only leaves the waiter's owner unseen.
  if (auto waiting = record_waiting_sql(request_, key_, backend_->owners()); !waiting.empty()) {
    session_->connection->execute(std::move(waiting), [](query_result) {});
  }
  session_->connection->execute(
      recorded(wait_sql(request_, key_, lock_timeout_ms_, backend_->token_expression())),
      [self = shared_from_this()](query_result r) { self->waited(std::move(r)); });
}

// Not running yet means still queued behind the connect: nothing was sent, so closing the
// session is clean.
void pg_acquire::send_cancel() {
  using event = dlock::detail::sql_wait_machine::event;
  feed(session_->connection->cancel_running() ? event::cancel_sent : event::nothing_to_cancel);
}

void pg_acquire::waited(query_result r) {
  answer_ = std::move(r);
  feed(wait_answer(answer_));
}

// A session-level lock survives the failed statement that may have taken it.
void pg_acquire::give_back() {
  session_->connection->execute(
      joined(unlock_if_held_sql(request_, key_),
             forget_grant_sql(request_, key_, "0", backend_->owners())),
      [self = shared_from_this()](query_result r) {
        using event = dlock::detail::sql_wait_machine::event;
        self->feed(r.ok() ? event::given_back : event::give_back_failed);
      });
}

void pg_acquire::book_grant() {
  granted_ = booked("0", std::stoull(answer_.value(1).value_or("0")));
}

// A wait's session holds nothing else: closing it frees what the wait took, and leaves a
// cancel that lands late nothing to hit.
void pg_acquire::discard_session() { session_->connection->close(); }

void pg_acquire::report(dlock::detail::sql_wait_machine::action what) {
  using action = dlock::detail::sql_wait_machine::action;
  complete(what == action::report_failed ? acquire_failure(*backend_, answer_, request_.name)
                                         : nullptr,
           std::move(granted_));
}

// Semaphores: LISTEN on the name's channel on a session of our own, then attempt again on
// each NOTIFY (every release sends one) and every semaphore_retry (a holder whose session
// died sends none).
void pg_acquire::listen() {
  session_ = backend_->sessions().session_for_wait();
  own_session_ = true;
  phase_ = phase::attempting;
  backend_->waiters().add(channel_, weak_from_this());
  session_->connection->execute(
      listen_sql(channel_) + "; " +
          recorded(attempt_sql(request_, key_, backend_->token_expression())),
      [self = shared_from_this()](query_result r) { self->attempted(std::move(r), true); });
}

void pg_acquire::wait_for_notification() {
  phase_ = phase::listening;
  retry_timer_.expires_after(backend_->settings().semaphore_retry);
  retry_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && self->phase_ == phase::listening) self->attempt_again();
  });
}

void pg_acquire::attempt_again() {
  retry_timer_.cancel();
  phase_ = phase::attempting;
  session_->connection->execute(
      recorded(attempt_sql(request_, key_, backend_->token_expression())),
      [self = shared_from_this()](query_result r) { self->attempted(std::move(r), true); });
}

void pg_acquire::end_listening() {
  backend_->waiters().remove(channel_, this);
  retry_timer_.cancel();
  if (!own_session_) return;
  session_->connection->execute(unlisten_sql(channel_), [](query_result) {});
}

// Ends a semaphore wait without a grant: the session goes back to the pool.
void pg_acquire::stop_listening() {
  end_listening();
  backend_->sessions().unreserve(session_);
}

void pg_acquire::stop() {
  if (phase_ == phase::done) return;
  stopped_ = true;
  timed_out_ = deadline_passed();
  if (phase_ == phase::listening) {
    stop_listening();
    complete(nullptr, nullptr);
    return;
  }
  if (phase_ == phase::waiting) {
    using event = dlock::detail::sql_wait_machine::event;
    feed(timed_out_ ? event::deadline : event::stop);
    return;
  }
  arm_answer_timeout();  // attempting: its answer comes soon, and completes
}

// The wait ends when the server confirms; core answers a stopped caller within its grace
// meanwhile. A server that does not answer (paused, unreachable) ends neither the statement by
// itself (lock_timeout) nor on the cancel: give the session up after connect_timeout. The
// server drops the wait, or frees what it granted, within its server_lease; every handle on
// the session is marked lost (nobody can vouch for them).
void pg_acquire::arm_answer_timeout() {
  retry_timer_.expires_after(backend_->settings().connect_timeout);
  retry_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->phase_ == phase::done) return;
    if (self->phase_ == phase::waiting) {
      self->feed(dlock::detail::sql_wait_machine::event::answer_overdue);
    } else {
      self->abandon_session();
    }
  });
}

void pg_acquire::abandon_session() {
  session_->connection->abandon(timed_out_
                                    ? "no answer within connect_timeout after the deadline"
                                    : "no answer within connect_timeout after a stop");
}

// The server ignores a cancel that reaches it before the statement it was meant for (the
// statement was sent just before the stop), so the machine has it sent again until the wait
// ends.
void pg_acquire::arm_cancel_retry(std::chrono::milliseconds after) {
  cancel_timer_.expires_after(after);
  cancel_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->phase_ != phase::waiting) return;
    self->feed(dlock::detail::sql_wait_machine::event::cancel_retry_due);
  });
}

void pg_acquire::complete(std::exception_ptr error, std::unique_ptr<lease> granted) {
  if (phase_ == phase::done) return;
  phase_ = phase::done;
  retry_timer_.cancel();
  cancel_timer_.cancel();
  auto done = std::move(done_);
  done(std::move(error), std::move(granted));
}

}  // namespace dlock::postgres::detail
