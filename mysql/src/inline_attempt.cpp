// The uncontended attempt on the caller's thread: a caller-driven connection, the same batch as
// mysql_acquire's first attempt, and no thread switch on the way there or back.
#include <algorithm>
#include <memory>

#include <dlock/core/backend/naming.hpp>

#include "acquire.hpp"
#include "backend.hpp"
#include "lock_name.hpp"
#include "mariadb_exchange.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

bool same(const statement_settings& a, const statement_settings& b) {
  return a.token == b.token && a.semaphore_table == b.semaphore_table &&
         a.election_table == b.election_table && a.grant_table == b.grant_table;
}

// The statements of the last request a thread attempted, and the terms of its last grant: a
// service takes the same lock again and again, and building them (every server name in them
// is a SHA-256) costs a quarter of the instructions of an uncontended cycle.
struct remembered_attempt {
  acquire_request request;
  statement_settings settings;
  std::string resource;
  std::string attempt;
  std::optional<std::string> granted_slot;  // the answer's slot that `hold` was made for
  granted_hold hold;

  bool remembers(const acquire_request& r, const statement_settings& s) const {
    return r.kind == request.kind && r.mode == request.mode &&
           r.max_count == request.max_count && r.name == request.name &&
           r.owner == request.owner && same(s, settings);
  }
};

// Shared, so that the statements an attempt uses live on when something it calls on the same
// thread (a lost signal's callbacks, run as a broken connection is given up) attempts another
// request.
std::shared_ptr<remembered_attempt> remembered(const acquire_request& r,
                                               const statement_settings& settings) {
  thread_local std::shared_ptr<remembered_attempt> last;
  if (!last || !last->remembers(r, settings)) {
    last = std::make_shared<remembered_attempt>(remembered_attempt{
        r, settings, resource_of(r), attempt_sql(r, settings, {}), std::nullopt, {}});
  }
  return last;
}

granted_hold hold_granted(remembered_attempt& last, const query_result& granting) {
  if (last.granted_slot != granting.value(0)) {
    last.hold = granted_by(last.request, last.settings, granting);
    last.granted_slot = granting.value(0);
  }
  granted_hold hold = last.hold;
  hold.token = std::stoull(granting.value(1).value_or("0"));
  return hold;
}

}  // namespace

std::unique_ptr<lease> mysql_backend::try_acquire_inline(const acquire_request& request) {
  check_slot_count(request, max_semaphore_slots);
  const auto last = remembered(request, statements_);
  const std::string& resource = last->resource;
  const std::string& attempt = last->attempt;
  for (int tries = 0;; ++tries) {
    std::string why;
    auto session = callers_->check_out(resource, why);
    if (!session) {
      std::rethrow_exception(
          failure(query_result{.message = why, .connection_broken = true}, request.name));
    }
    const bool reused = !session->fresh;
    session->fresh = false;
    // One round trip: a server that does not answer it within connect_timeout (or the
    // keepalive period, if shorter) is given up, as a pooled attempt's connection is once its
    // keepalive goes unanswered.
    const auto sent = std::chrono::steady_clock::now();
    const auto deadline = sent + std::min(options_.connect_timeout, options_.keepalive);
    const query_result r = exchange_blocking(session->conn, endpoint_, attempt, deadline);
    if (!r.ok()) {
      // A batch that failed half-way may have taken some of the name's locks: given back on
      // the same connection, or the connection ends, which frees them (and marks its other
      // grants lost).
      const bool given_back =
          !r.connection_broken &&
          exchange_blocking(session->conn, endpoint_, release_sql(request, statements_, {}),
                            deadline)
              .ok();
      if (given_back) {
        callers_->check_in(session);
      } else {
        callers_->give_up(session);
      }
      // A connection the server ended while it sat idle (a restart) fails at once: one more
      // try on a fresh one, as the pool, which hears of the end, would have made.
      if (r.connection_broken && reused && tries == 0 &&
          std::chrono::steady_clock::now() < deadline) {
        continue;
      }
      std::rethrow_exception(failure(r, request.name));
    }
    if (auto other = other_max_count(request, r)) {
      callers_->check_in(session);
      throw max_count_mismatch(request, *other);
    }
    if (!r.value(1)) {
      callers_->check_in(session);
      return nullptr;
    }
    auto hold = hold_granted(*last, r);
    auto granted = std::make_unique<mysql_caller_lease>(
        shared_from_this(), session, request.name, hold.unlock_sql, hold.token,
        callers_->validity_of_grant(*session, sent));
    hold.grant.lost = granted->lost_signal();
    granted->attach(callers_->add_grant(*session, std::move(hold.grant)));
    callers_->check_in(session);
    return granted;
  }
}

}  // namespace dlock::mysql::detail
