#include "acquire.hpp"

#include <algorithm>
#include <optional>

#include <boost/asio/post.hpp>

#include "backend.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

// How long a wait whose KILL the server confirmed may take to answer before its connection is
// closed (kill_answered). A live server answers a killed GET_LOCK within milliseconds; 40 ms
// keeps a stopped acquire's clean-up within the contract's 100 ms on a loaded machine.
constexpr std::chrono::milliseconds killed_batch_patience{40};

// What one connection holds at most once: a name per primitive (every mode and slot of it).
std::string resource_of(const acquire_request& r) {
  switch (r.kind) {
    case primitive::lock: return "L" + r.name;
    case primitive::reader_writer_lock: return "W" + r.name;
    case primitive::semaphore: return "S" + r.name;
    case primitive::upgrade_gate: return "U" + r.name;
    case primitive::election: return "E" + r.name;
  }
  return {};
}

bool writes(const acquire_request& r) {
  return r.kind == primitive::reader_writer_lock && r.mode == lock_mode::exclusive;
}

// The max_count of the semaphore's live holders when it is not ours (attempt_sql).
std::optional<std::uint64_t> other_max_count(const acquire_request& r, const query_result& result) {
  if (r.kind != primitive::semaphore) return std::nullopt;
  const auto other = result.value(2);
  return other ? std::optional(std::stoull(*other)) : std::nullopt;
}

}  // namespace

mysql_acquire::mysql_acquire(std::shared_ptr<mysql_backend> backend, acquire_request request,
                             acquire_completion done)
    : backend_(std::move(backend)), request_(std::move(request)), done_(std::move(done)),
      resource_(resource_of(request_)), timer_(backend_->executor()) {
  // Waiters of one semaphore spread over its slots.
  if (request_.kind == primitive::semaphore) {
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

void mysql_acquire::cancel() noexcept {
  try {
    boost::asio::post(backend_->executor(), [self = shared_from_this()] { self->stop(); });
  } catch (...) {
  }
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
  if (auto token = r.value(1)) {
    grant(static_cast<std::uint32_t>(std::stoul(r.value(0).value_or("0"))), std::stoull(*token));
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
  if (request_.kind == primitive::reader_writer_lock && !writes(request_) &&
      r.value(2) == std::optional<std::string>("1")) {
    pause_before_waiting();
    return;
  }
  wait();
}

void mysql_acquire::grant(std::uint32_t slot, std::uint64_t token) {
  const auto unlock =
      release_sql(request_, backend_->statements(),
                  writes(request_) ? std::nullopt : std::optional(slot));
  auto granted = std::make_unique<mysql_lease>(backend_, session_, unlock, token);
  granted->attach(backend_->sessions().add_grant(
      *session_, {resource_, checked_name(request_, slot), granted->lost_signal()}));
  if (own_session_) backend_->sessions().unreserve(session_);
  complete(nullptr, std::move(granted));
}

// GET_LOCK until the deadline (semaphores and readers: a slice of semaphore_retry), on the
// reserved connection.
void mysql_acquire::wait() {
  phase_ = phase::waiting;
  auto limit = std::chrono::nanoseconds(wait_forever);
  if (request_.deadline != std::chrono::steady_clock::time_point::max()) {
    limit = std::max<std::chrono::nanoseconds>(
        request_.deadline - std::chrono::steady_clock::now(), std::chrono::milliseconds(1));
  }
  const bool sliced = request_.kind == primitive::semaphore;
  if (sliced) limit = std::min(limit, backend_->settings().semaphore_retry);
  const std::uint32_t slot = next_slot_;
  if (sliced) next_slot_ = (next_slot_ + 1) % request_.max_count;
  session_->connection->execute(
      attempt_sql(request_, backend_->statements(), limit, slot),
      [self = shared_from_this()](query_result r) { self->waited(std::move(r)); });
}

void mysql_acquire::waited(query_result r) {
  if (kill_sent_) {
    if (r.connection_broken) {
      // A server that went silent after the deadline is a connection_error, never "not
      // obtained".
      end_wait();
      complete(timed_out_ ? backend_->failure(r, request_.name) : nullptr, nullptr);
      return;
    }
    give_back_killed_wait();
    return;
  }
  if (!r.ok()) {
    end_wait();
    complete(backend_->failure(r, request_.name), nullptr);
    return;
  }
  if (auto other = other_max_count(request_, r)) {
    backend_->sessions().unreserve(session_);
    complete(std::make_exception_ptr(backend_->max_count_mismatch(request_, *other)), nullptr);
    return;
  }
  if (auto token = r.value(1)) {
    grant(static_cast<std::uint32_t>(std::stoul(r.value(0).value_or("0"))), std::stoull(*token));
    return;
  }
  const bool deadline_passed = request_.deadline != std::chrono::steady_clock::time_point::max() &&
                               std::chrono::steady_clock::now() >= request_.deadline;
  if (stopped_ || deadline_passed) {
    backend_->sessions().unreserve(session_);
    complete(nullptr, nullptr);
    return;
  }
  if (request_.kind == primitive::reader_writer_lock && !writes(request_)) {
    pause_before_waiting();  // past the gate, but every reader slot was taken
    return;
  }
  wait();
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
  if (phase_ == phase::done || stopped_) return;
  stopped_ = true;
  timed_out_ = request_.deadline != std::chrono::steady_clock::time_point::max() &&
               std::chrono::steady_clock::now() >= request_.deadline;
  if (phase_ == phase::pausing) {
    timer_.cancel();
    backend_->sessions().unreserve(session_);
    complete(nullptr, nullptr);
    return;
  }
  if (phase_ == phase::waiting) kill_wait();
  // attempting: the attempt's answer comes soon and completes.
}

// KILL QUERY from another connection ends the server's wait at once (GET_LOCK returns NULL).
// A server that answers neither (paused, unreachable) gets connect_timeout, after which the
// waiting connection is given up: the server drops its wait, or frees what it granted,
// within its server_lease.
void mysql_acquire::kill_wait() {
  const std::uint64_t target = session_->connection->thread_id();
  if (target == 0) {
    // Still connecting: nothing was sent, so closing the connection is clean.
    end_wait();
    complete(nullptr, nullptr);
    return;
  }
  kill_sent_ = true;
  backend_->sessions().session_for_attempt("")->connection->execute(
      kill_query_sql(target), [weak = weak_from_this()](query_result r) {
        auto self = weak.lock();
        if (self && r.ok()) self->kill_answered();
      });
  // Core answers a stopped caller within its grace even when the server is silent; this
  // completes when the server confirms, or once the connection is given up. A deadline with a
  // silent server is then a connection_error, not "not obtained".
  timer_.expires_after(backend_->settings().connect_timeout);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!ec && self) {
      self->session_->connection->abandon("no answer within connect_timeout after a stop");
    }
  });
}

// The server answered the KILL, so it is alive and the waiting statement's answer is due.
// MariaDB 10.11 sometimes never answers a batch killed between two of its statements (the
// client waits for the next result forever): after killed_batch_patience the waiting
// connection is closed, which frees whatever the batch took, and the acquire ends as not
// obtained.
void mysql_acquire::kill_answered() {
  if (session_->connection->broken()) return;
  timer_.expires_after(killed_batch_patience);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->session_->connection->broken()) return;
    self->end_wait();
    self->complete(nullptr, nullptr);
  });
}

// A grant may have won the race against our KILL, and a KILL that ended the batch early left
// what its first statements took (a writer's gate). The server frees all of it when the
// connection closes, but only once its thread notices, after the caller may have heard: so
// the wait's connection gives it back first, and the acquire completes once the server
// confirmed. Closing afterwards settles a KILL that lands late, on whatever runs next (the
// give-back then fails, and closing frees the rest).
void mysql_acquire::give_back_killed_wait() {
  session_->connection->execute(
      release_sql(request_, backend_->statements(), std::nullopt),
      [self = shared_from_this()](query_result) {
        self->end_wait();
        self->complete(nullptr, nullptr);
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
  // After a KILL, the timer gives the waiting connection up if the server never answers.
  if (!kill_sent_ || session_->connection->broken()) timer_.cancel();
  auto done = std::move(done_);
  done(std::move(error), std::move(granted));
}

}  // namespace dlock::mysql::detail
