#include "acquire.hpp"

#include <algorithm>
#include <optional>

#include "backend.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

// How long a wait whose KILL the server confirmed may take to answer before its connection is
// closed. A live server answers a killed GET_LOCK within milliseconds, but MariaDB 10.11
// sometimes never answers a batch killed between two of its statements (the client waits for
// the next result forever); 40 ms keeps a stopped acquire's clean-up within the contract's
// 100 ms on a loaded machine.
constexpr std::chrono::milliseconds killed_batch_patience{40};

}  // namespace

// What one connection holds at most once: a name per primitive (every mode and slot of it).
std::string resource_of(const acquire_request& r) {
  switch (r.kind) {
    case resource_kind::lock: return "L" + r.name;
    case resource_kind::reader_writer_lock: return "W" + r.name;
    case resource_kind::semaphore: return "S" + r.name;
    case resource_kind::upgrade_gate: return "U" + r.name;
    case resource_kind::election: return "E" + r.name;
  }
  return {};
}

bool writes(const acquire_request& r) {
  return r.kind == resource_kind::reader_writer_lock && r.mode == lock_mode::exclusive;
}

// The max_count of the semaphore's live holders when it is not ours (attempt_sql).
std::optional<std::uint64_t> other_max_count(const acquire_request& r, const query_result& result) {
  if (r.kind != resource_kind::semaphore) return std::nullopt;
  const auto other = result.value(2);
  return other ? std::optional(std::stoull(*other)) : std::nullopt;
}

mysql_acquire::mysql_acquire(std::shared_ptr<mysql_backend> backend, acquire_request request,
                             acquire_completion done)
    : pooled_sql_acquire(std::move(backend), std::move(request), std::move(done)),
      timer_(backend_->executor()) {
  resource_ = resource_of(request_);
  // Waiters of one semaphore spread over its slots.
  if (request_.kind == resource_kind::semaphore) {
    next_slot_ = static_cast<std::uint32_t>(
        reinterpret_cast<std::uintptr_t>(this) / sizeof(void*) % request_.max_count);
  }
}

void mysql_acquire::start() {
  session_ = backend_->sessions().session_for_attempt(resource_);
  session_->attempting.insert(resource_);
  session_->connection->execute(
      attempt_sql(request_, backend_->statements(), {}), [self = shared_from_this()](query_result r) {
        // Answered: from here the grant (if any) is in the books, or the session is free of it.
        auto& attempting = self->session_->attempting;
        attempting.erase(attempting.find(self->resource_));
        self->attempted(std::move(r));
      });
}

// The first attempt, on a shared connection.
void mysql_acquire::attempted(query_result r) {
  if (!r.ok()) {
    if (!r.connection_broken) {
      // A statement that failed half-way may have taken some of the name's locks.
      session_->connection->execute(release_sql(request_, backend_->statements(), std::nullopt), [](query_result) {});
    }
    complete(backend_->failure(r, request_.name), nullptr);
    return;
  }
  if (auto other = other_max_count(request_, r)) {
    complete(std::make_exception_ptr(backend_->max_count_mismatch(request_, *other)), nullptr);
    return;
  }
  if (r.value(1)) {
    grant(r);
    return;
  }
  if (stopped_ || !request_.wait) {
    complete(nullptr, nullptr);
    return;
  }
  backend_->events().acquire_waiting();
  session_ = backend_->sessions().session_for_wait();
  own_session_ = true;
  // A reader that found the gate free but every slot taken has nothing to wait at.
  if (request_.kind == resource_kind::reader_writer_lock && !writes(request_) &&
      r.value(2) == std::optional<std::string>("1")) {
    pause_before_waiting();
    return;
  }
  wait();
}

granted_hold granted_by(const acquire_request& r, const statement_settings& settings,
                        const query_result& granting) {
  const auto slot = static_cast<std::uint32_t>(std::stoul(granting.value(0).value_or("0")));
  return {release_sql(r, settings, writes(r) ? std::nullopt : std::optional(slot)),
          std::stoull(granting.value(1).value_or("0")),
          {resource_of(r), checked_name(r, slot), {}}};
}

// The grant that `granting` answered (its slot, then its token), booked on the session.
std::unique_ptr<lease> mysql_acquire::booked(const query_result& granting) {
  auto hold = granted_by(request_, backend_->statements(), granting);
  auto granted = std::make_unique<mysql_lease>(backend_, session_, request_.name, hold.unlock_sql,
                                               hold.token, grant_validity_now());
  hold.grant.lost = granted->lost_signal();
  granted->attach(backend_->sessions().add_grant(*session_, std::move(hold.grant)));
  return granted;
}

void mysql_acquire::grant(const query_result& granting) {
  auto granted = booked(granting);
  if (own_session_) backend_->sessions().unreserve(session_);
  complete(nullptr, std::move(granted));
}

// GET_LOCK until the deadline (semaphores and readers: a slice of semaphore_retry), on the
// reserved connection; each slice a wait of its own.
void mysql_acquire::wait() {
  phase_ = phase::waiting;
  start_wait({.give_back_after_cancel = true});
}

void mysql_acquire::send_wait() {
  auto limit = std::chrono::nanoseconds(wait_forever);
  if (request_.deadline != std::chrono::steady_clock::time_point::max()) {
    limit = std::max<std::chrono::nanoseconds>(
        request_.deadline - std::chrono::steady_clock::now(), std::chrono::milliseconds(1));
  }
  const bool sliced = request_.kind == resource_kind::semaphore;
  if (sliced) limit = std::min(limit, backend_->settings().semaphore_retry);
  const std::uint32_t slot = next_slot_;
  if (sliced) next_slot_ = (next_slot_ + 1) % request_.max_count;
  session_->connection->execute(
      attempt_sql(request_, backend_->statements(), limit, slot),
      [self = shared_from_this()](query_result r) { self->waited(std::move(r)); });
}

void mysql_acquire::arm_answer_timeout() {
  arm_timer(backend_->settings().connect_timeout,
            dlock::detail::sql_wait_machine::event::answer_overdue);
}

void mysql_acquire::arm_patience() {
  arm_timer(killed_batch_patience, dlock::detail::sql_wait_machine::event::patience_elapsed);
}

void mysql_acquire::abandon_session() {
  session_->connection->abandon("no answer within connect_timeout after a stop");
}

void mysql_acquire::book_grant() { granted_ = booked(answer_); }

void mysql_acquire::discard_session() { end_wait(); }

void mysql_acquire::report(dlock::detail::sql_wait_machine::action what) {
  std::exception_ptr error;
  if (what == dlock::detail::sql_wait_machine::action::report_failed) {
    if (auto other = answer_.ok() ? other_max_count(request_, answer_) : std::nullopt) {
      error = std::make_exception_ptr(backend_->max_count_mismatch(request_, *other));
    } else {
      error = backend_->failure(answer_, request_.name);
    }
  }
  complete(std::move(error), std::move(granted_));
}

void mysql_acquire::waited(query_result r) {
  using event = dlock::detail::sql_wait_machine::event;
  answer_ = std::move(r);
  event answer = event::not_granted;
  if (answer_.connection_broken) {
    answer = event::connection_lost;
  } else if (!answer_.ok()) {
    answer = event::failed;
  } else if (other_max_count(request_, answer_)) {
    answer = event::failed_cleanly;
  } else if (answer_.value(1)) {
    answer = event::granted;
  }
  const bool deadline_passed = request_.deadline != std::chrono::steady_clock::time_point::max() &&
                               std::chrono::steady_clock::now() >= request_.deadline;
  // A slice that ended with nothing, and nothing asked of it: wait again.
  const bool asked_nothing =
      wait_machine().current() == dlock::detail::sql_wait_machine::phase::waiting;
  if (answer == event::not_granted && asked_nothing && !deadline_passed) {
    if (request_.kind == resource_kind::reader_writer_lock && !writes(request_)) {
      pause_before_waiting();  // past the gate, but every reader slot was taken
      return;
    }
    wait();
    return;
  }
  feed(answer);
}

// Readers when all reader slots are taken: a slot frees without telling anyone who waits
// elsewhere, so try again after semaphore_retry.
void mysql_acquire::pause_before_waiting() {
  phase_ = phase::pausing;
  timer_.expires_after(backend_->settings().semaphore_retry);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && self->phase_ == phase::pausing) self->wait();
  });
}

void mysql_acquire::stop() {
  using event = dlock::detail::sql_wait_machine::event;
  if (phase_ == phase::done || stopped_) return;
  stopped_ = true;
  const bool timed_out = request_.deadline != std::chrono::steady_clock::time_point::max() &&
                         std::chrono::steady_clock::now() >= request_.deadline;
  if (phase_ == phase::pausing) {
    timer_.cancel();
    backend_->sessions().unreserve(session_);
    complete(nullptr, nullptr);
    return;
  }
  if (phase_ == phase::waiting) feed(timed_out ? event::deadline : event::stop);
  // attempting: the attempt's answer comes soon and completes.
}

// KILL QUERY from another connection ends the server's wait at once (GET_LOCK returns NULL).
// A connection still connecting has sent nothing, so closing it is clean.
void mysql_acquire::send_cancel() {
  using event = dlock::detail::sql_wait_machine::event;
  const std::uint64_t target = session_->connection->thread_id();
  if (target == 0) {
    feed(event::nothing_to_cancel);
    return;
  }
  backend_->sessions().session_for_attempt("")->connection->execute(
      kill_query_sql(target), [weak = weak_from_this()](query_result r) {
        auto self = weak.lock();
        if (!self) return;
        // A connection that broke meanwhile answers as such, whatever the KILL did.
        if (r.ok() && self->session_->connection->broken()) return;
        self->feed(r.ok() ? event::cancel_confirmed : event::cancel_failed);
      });
  feed(event::cancel_sent);
}

// The one timer of a wait: connect_timeout for a server that answers neither the wait nor the
// KILL, then, once the KILL is confirmed, the killed batch's patience in its place.
void mysql_acquire::arm_timer(std::chrono::nanoseconds after,
                              dlock::detail::sql_wait_machine::event then) {
  timer_.expires_after(after);
  timer_.async_wait([weak = weak_from_this(), then](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->phase_ != phase::waiting) return;
    // The broken connection's answer is on its way, and settles the wait.
    if (then == dlock::detail::sql_wait_machine::event::patience_elapsed &&
        self->session_->connection->broken()) {
      return;
    }
    self->feed(then);
  });
}

// A grant may have won the race against our KILL, and a KILL that ended the batch early left
// what its first statements took (a writer's gate). The server frees all of it when the
// connection closes, but only once its thread notices, after the caller may have heard: so
// the wait's connection gives it back first, and the acquire completes once the server
// confirmed. Closing afterwards settles a KILL that lands late, on whatever runs next (the
// give-back then fails, and closing frees the rest).
void mysql_acquire::give_back() {
  session_->connection->execute(
      release_sql(request_, backend_->statements(), std::nullopt),
      [self = shared_from_this()](query_result r) {
        using event = dlock::detail::sql_wait_machine::event;
        self->feed(r.ok() ? event::given_back : event::give_back_failed);
      });
}

void mysql_acquire::end_wait() {
  session_->reserved = false;
  session_->connection->close();
  timer_.cancel();
}

void mysql_acquire::complete(std::exception_ptr error, std::unique_ptr<lease> granted) {
  if (phase_ == phase::done) return;
  phase_ = phase::done;
  timer_.cancel();
  auto done = std::move(done_);
  done(std::move(error), std::move(granted));
}

}  // namespace dlock::mysql::detail
