// The uncontended attempt on the caller's thread: a caller-driven session, the same statements
// as pg_acquire's first attempt, and no thread switch on the way there or back.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>

#include <dlock/core/errors.hpp>

#include "acquire.hpp"
#include "backend.hpp"
#include "blocking_libpq.hpp"
#include "failure.hpp"
#include "semaphore_keys.hpp"
#include "sql.hpp"

namespace dlock::postgres::detail {

namespace {

// The statements of the last request a thread attempted, and the release of its last grant: a
// service takes the same lock again and again, and building their text was 6.4k of the 16k
// instructions dlock added to an uncontended cycle (docs/benchmarks.md). Shared, so that the
// statements an attempt uses live on when something it calls on the same thread (a lost
// signal's callbacks, run as a broken session is given up) attempts another request.
struct remembered_statements {
  acquire_request request;
  std::string token_expression;
  std::string owners_table;
  std::string resource;
  std::string attempt;
  std::optional<std::string> released_slot;  // the slot that `release` was made for
  std::string release;

  bool remembers(const acquire_request& r, const std::string& token,
                 const owner_records& owners) const {
    return r.kind == request.kind && r.mode == request.mode &&
           r.max_count == request.max_count && r.name == request.name &&
           r.owner == request.owner && token == token_expression &&
           owners.table == owners_table;
  }
};

std::shared_ptr<remembered_statements> remembered(const acquire_request& r,
                                                  const advisory_key& key,
                                                  const std::string& token,
                                                  const owner_records& owners) {
  thread_local std::shared_ptr<remembered_statements> last;
  if (!last || !last->remembers(r, token, owners)) {
    last = std::make_shared<remembered_statements>(remembered_statements{
        r, token, owners.table, resource_of(r, key),
        record_grant_sql(attempt_sql(r, key, token), r, key, owners), std::nullopt, {}});
  }
  return last;
}

}  // namespace

std::unique_ptr<lease> postgres_backend::try_acquire_inline(const acquire_request& request) {
  return attempt_on_caller_session(request, -1);
}

// nullptr too when `wakeup` became readable while a session was opened (a stop request).
std::unique_ptr<lease> postgres_backend::attempt_on_caller_session(const acquire_request& request,
                                                                   int wakeup) {
  check_slot_count(request, max_semaphore_slots);
  const advisory_key key = key_of(request);
  const auto statements = remembered(request, key, token_expression_, owners_);
  const std::string& resource = statements->resource;
  const std::string& attempt = statements->attempt;
  for (int tries = 0;; ++tries) {
    std::string why;
    auto session = callers_->check_out(resource, why, wakeup);
    if (!session && why.empty()) return nullptr;
    if (!session) throw connection_error(message(why, request.name));
    const bool reused = !session->fresh;
    session->fresh = false;
    // One round trip: a server that does not answer it within connect_timeout (or the
    // keepalive period, if shorter) is given up, as a pooled attempt is once its deadline
    // and connect_timeout have passed, or its keepalive goes unanswered.
    const auto sent = std::chrono::steady_clock::now();
    const auto deadline = sent + std::min(options_.connect_timeout, options_.keepalive);
    const query_result r = send_blocking(session->conn, endpoint_, attempt, {}, deadline);
    if (!r.ok()) {
      // A deadlock took nothing; any other failure may have left the lock taken (the fencing
      // sequence or the owners' table missing), and a broken session freed it: ending the
      // session settles both, and marks its other grants lost.
      if (r.sqlstate == "40P01") {
        callers_->check_in(session);
      } else {
        callers_->give_up(session);
      }
      // A session the server ended while it sat idle (a restart) fails at once: one more try
      // on a fresh one, as the pool, which hears of the end, would have made.
      if (r.connection_broken && reused && tries == 0 &&
          std::chrono::steady_clock::now() < deadline) {
        continue;
      }
      std::rethrow_exception(acquire_failure(*this, r, request.name));
    }
    if (auto token = r.value(1)) {
      return grant_on_caller_session(request, key, session, *r.value(0), std::stoull(*token),
                                     callers_->validity_of_grant(*session, sent));
    }
    callers_->check_in(session);
    if (request.kind == resource_kind::semaphore) {
      if (auto other = r.value(2)) throw max_count_mismatch(request, std::stoull(*other));
    }
    return nullptr;
  }
}

// The grant of `slot` on a checked-out session, which goes back checked in with it.
std::unique_ptr<lease> postgres_backend::grant_on_caller_session(
    const acquire_request& request, const advisory_key& key,
    const caller_sessions::session_ptr& session, const std::string& slot, std::uint64_t token,
    std::shared_ptr<const grant_validity> validity) {
  const auto statements = remembered(request, key, token_expression_, owners_);
  if (statements->released_slot != slot) {
    statements->release =
        joined(unlock_sql(request, key, slot), forget_grant_sql(request, key, slot, owners_));
    statements->released_slot = slot;
  }
  auto granted = std::make_unique<pg_caller_lease>(shared_from_this(), session, request.name,
                                                   statements->release, token, std::move(validity));
  granted->attach(callers_->add_grant(*session, {statements->resource, granted->lost_signal()}));
  callers_->check_in(session);
  return granted;
}

// What the pool's sessions run first (session_pool.cpp), on the caller's thread.
std::string postgres_backend::prepare_caller_session(
    PGconn* conn, std::chrono::steady_clock::time_point deadline, std::string& backend_start) {
  query_result r = send_blocking(conn, endpoint_, session_setup_.required, {}, deadline);
  if (r.connection_broken) return r.message;
  if (!r.ok()) {
    return "cannot set the server-side lease (" + r.message +
           "; idle_session_timeout needs PostgreSQL 14 or later)";
  }
  r = send_blocking(conn, endpoint_, session_setup_.optional + "; " + own_backend_start_sql(), {},
                    deadline);
  if (r.ok() && r.value()) backend_start = *r.value();
  if (!r.connection_broken) {
    for (const auto& needed : creations_needed()) {
      r = send_blocking(conn, endpoint_, needed.sql, {}, deadline);
      if (r.connection_broken) break;
      creation_answered(needed, r);
    }
  }
  if (r.connection_broken) return r.message;
  return {};
}

}  // namespace dlock::postgres::detail
