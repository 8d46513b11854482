// Private to dlock::postgres: the backend behind dlock::postgres::provider.
//
// Where to start: a blocking acquire makes its attempt on the caller's thread
// (try_acquire_inline, inline_attempt.cpp) on a caller-driven session (caller_sessions.hpp),
// and a lock's wait too (acquire_waiting_inline, caller_wait.cpp); their grants are
// pg_caller_leases. Everything else (async acquires, semaphores' waits) is a pg_acquire
// (acquire.hpp), one acquire from attempt to grant on the session_pool's sessions, which a
// keepalive probes, whose grant is a pg_lease. The SQL is in sql.hpp; a pooled session is a pg_connection over libpq's
// asynchronous calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include <dlock/core/backend/backend.hpp>
#include <dlock/postgres/options.hpp>

#include "board_connection.hpp"
#include "cancel_request.hpp"
#include "caller_lease.hpp"
#include "caller_sessions.hpp"
#include "notify_waiters.hpp"
#include "pooled_lease.hpp"
#include "session_keepalive.hpp"
#include "session_pool.hpp"
#include "sql.hpp"

namespace dlock::postgres::detail {

/// The pool of sessions, the keepalive and the semaphore waiters, whose state lives on the io
/// thread (start_acquire and their releases post there); and the caller-driven sessions, which
/// callers' threads check out for an uncontended attempt and its release.
class postgres_backend final : public dlock::backend,
                               public inline_acquirer,
                               public std::enable_shared_from_this<postgres_backend> {
 public:
  /// Throws std::invalid_argument for a bad option or connection string (naming it).
  explicit postgres_backend(options opts);
  ~postgres_backend() override;

  std::string_view scheme() const noexcept override { return "postgres"; }
  // An advisory lock ends with its session; keeping one past its release would take a record
  // on the server that every acquire reads, which costs more than the floor allows
  // (docs/semantics.md, "Minimum hold").
  std::string min_hold_refusal() const override {
    return "an advisory lock ends with its session, and dlock keeps no record of a hold there";
  }
  std::string endpoint() const override { return endpoint_; }
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;

  // inline_attempt.cpp: one attempt on a caller-driven session, on the caller's thread; it
  // needs a round trip, so an async acquire does not make it.
  inline_acquirer* as_inline_acquirer() noexcept override { return this; }
  bool acquires_inline_locally() const noexcept override { return false; }
  std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) override;
  // caller_wait.cpp: a blocking acquire's wait for a lock, on a caller-driven session too
  // (semaphores wait for NOTIFYs on the provider's thread).
  bool waits_inline(const acquire_request& request) const noexcept override {
    return request.kind != resource_kind::semaphore;
  }
  std::unique_ptr<lease> acquire_waiting_inline(const acquire_request& request,
                                                std::stop_token withdraw,
                                                std::stop_token give_up) override;
  /// Not connected while the server leaves the keepalive of the pool or of the caller-driven
  /// sessions unanswered (health.hpp).
  provider_health health() const override;

  /// The board of dlock_leaders (election_board.cpp), one per provider; nullptr without a
  /// fencing sequence (terms are its tokens).
  std::shared_ptr<election_board> elections() override;

  // inspector.cpp: pg_locks and the owners' table, on a session of their own.
  lock_inspection inspect(const std::string& name) override;
  /// inspect()'s holders; needs owners_table and fencing_sequence (std::invalid_argument).
  bool is_current(const acquire_request& request, std::uint64_t fencing_token) override;
  std::vector<lock_inspection> list_locks(const std::string& prefix) override;
  void break_lock(const std::string& name) override;

  /// Makes the session pool and starts its keepalive; called once the backend is owned by a
  /// shared_ptr. Connects nothing yet.
  void start() override;

  const options& settings() const noexcept { return options_; }

  /// `nextval('seq')`, or `0` without fencing.
  const std::string& token_expression() const noexcept { return token_expression_; }

  /// Where grants record their owners (sql.hpp).
  const owner_records& owners() const noexcept { return owners_; }

  /// The caller-driven sessions (thread-safe).
  caller_sessions& callers() noexcept { return *callers_; }

  // io thread only:
  session_pool& sessions() noexcept { return *pool_; }
  session_keepalive<session_pool>& keepalive() noexcept { return *keepalive_; }
  notify_waiters& waiters() noexcept { return waiters_; }

 private:
  /// A statement that creates what the grants need (the fencing sequence, the owners'
  /// table), sent on new sessions until one has answered it.
  struct creation {
    std::atomic<bool> postgres_backend::*created;
    std::string sql;
    std::string what;
  };
  std::vector<creation> creations_needed() const;
  void creation_answered(const creation& done, const query_result& r);
  void session_opened(pg_connection& connection);
  std::string prepare_caller_session(PGconn* conn, std::chrono::steady_clock::time_point deadline,
                                     std::string& backend_start);
  std::unique_ptr<lease> grant_on_caller_session(const acquire_request& request,
                                                 const advisory_key& key,
                                                 const caller_sessions::session_ptr& session,
                                                 const std::string& slot, std::uint64_t token,
                                                 std::shared_ptr<const grant_validity> validity);
  std::unique_ptr<lease> attempt_on_caller_session(const acquire_request& request, int wakeup);
  std::unique_ptr<lease> wait_on_caller_session(const acquire_request& request,
                                                const caller_sessions::session_ptr& session,
                                                int woken_by_stop, const std::stop_token& stop,
                                                const std::stop_token& give_up);
  bool send_caller_wait(const acquire_request& request, const advisory_key& key, PGconn* conn,
                        long long timeout_ms, query_result& broken);
  bool give_back_granted_in_race(const acquire_request& request, const advisory_key& key,
                                 const caller_sessions::session_ptr& session);
  board_connection& inspector_connection();
  query_result inspector_query(const std::string& sql, const std::string& bytes,
                               const std::string& what);
  void forget_ended(const std::string& which, const std::string& bytes);

  options options_;
  std::string endpoint_;
  std::string token_expression_;
  owner_records owners_;
  session_setup session_setup_;  // the server_lease's settings
  std::atomic<bool> fencing_sequence_created_{false};
  std::atomic<bool> owners_table_created_{false};
  notify_waiters waiters_;
  std::shared_ptr<session_pool> pool_;
  std::shared_ptr<session_keepalive<session_pool>> keepalive_;
  std::shared_ptr<caller_sessions> callers_;
  // pg_cancel_backend over a control session of its own, for the waits of both kinds of
  // session (made in start()).
  canceller cancel_by_control_;
  std::mutex board_mutex_;
  std::shared_ptr<election_board> board_;  // made on first use
  std::unique_ptr<board_connection> inspector_connection_;  // made on first use
};

/// A grant on one session, given back with its unlock statement.
using pg_lease = pooled_lease<postgres_backend, pg_session>;

/// A grant on one caller-driven session, given back on the releasing thread.
using pg_caller_lease = caller_lease<postgres_backend, caller_session>;

}  // namespace dlock::postgres::detail
