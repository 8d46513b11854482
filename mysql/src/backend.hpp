// Private to dlock::mysql: the backend behind dlock::mysql::provider.
//
// Where to start: a blocking acquire makes its attempt on the caller's thread
// (try_acquire_inline, inline_attempt.cpp) on a caller-driven connection (caller_sessions.hpp),
// and its grant is a mysql_caller_lease. Everything else (waits, async acquires) is a
// mysql_acquire (acquire.hpp), one acquire from attempt to grant; it takes connections from the
// session_pool, which the SQL backends' session_keepalive probes; its grant is a mysql_lease
// (pooled_lease). The SQL is in statements.hpp, the server names in lock_name.hpp; a pooled
// connection is a mariadb_connection over Connector/C's non-blocking calls, a caller-driven one
// runs the same calls under poll(2) (mariadb_exchange.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/backend/backend.hpp>
#include <dlock/mysql/options.hpp>

#include "caller_lease.hpp"
#include "caller_sessions.hpp"
#include "connection.hpp"
#include "pooled_lease.hpp"
#include "session_keepalive.hpp"
#include "session_pool.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

/// The pool of connections and its keepalive, whose state lives on the io thread (start_acquire
/// and its releases post there); and the caller-driven connections, which callers' threads
/// check out for an uncontended attempt and its release.
class mysql_backend final : public dlock::backend,
                            public inline_acquirer,
                            public std::enable_shared_from_this<mysql_backend> {
 public:
  /// Throws std::invalid_argument for a bad option (naming it).
  explicit mysql_backend(options opts);
  ~mysql_backend() override;

  std::string_view scheme() const noexcept override { return "mysql"; }
  // As PostgreSQL's (docs/semantics.md, "Minimum hold").
  std::string min_hold_refusal() const override {
    return "a named lock ends with its connection, and dlock keeps no record of a hold there";
  }
  std::string endpoint() const override { return endpoint_; }
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;

  // inline_attempt.cpp: one attempt on a caller-driven connection, on the caller's thread; it
  // needs a round trip, so an async acquire does not make it. Waits stay on the io thread.
  inline_acquirer* as_inline_acquirer() noexcept override { return this; }
  bool acquires_inline_locally() const noexcept override { return false; }
  std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) override;

  /// Makes the pools and starts their keepalives. Connects nothing yet.
  void start() override;
  /// Not connected while the server leaves the keepalive of the pool or of the caller-driven
  /// connections unanswered (health.hpp).
  provider_health health() const override;

  const options& settings() const noexcept { return options_; }
  /// The fencing token's expression and the semaphore table, for statements.hpp.
  const statement_settings& statements() const noexcept { return statements_; }

  /// The error an acquire of `name` fails with for `result`.
  std::exception_ptr failure(const query_result& result, std::string_view name) const;

  /// The provider's one election board (election_board.cpp), made on first use; nullptr
  /// when options.election_table is empty.
  std::shared_ptr<election_board> elections() override;

  // inspector.cpp: the grant table's live rows, the process list's waits, the slots held now;
  // a break KILLs the holders' connections.
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;
  lock_inspection inspect(const std::string& name) override;
  /// inspect()'s holders; needs grant_table and fencing_sequence (std::invalid_argument).
  bool is_current(const acquire_request& request, std::uint64_t fencing_token) override;
  std::vector<lock_inspection> list_locks(const std::string& prefix) override;
  void break_lock(const std::string& name) override;

  /// The caller-driven connections (thread-safe).
  caller_sessions& callers() noexcept { return *callers_; }

  // io thread only:
  session_pool& sessions() noexcept { return *pool_; }
  session_keepalive<session_pool>& keepalive() noexcept { return *keepalive_; }

 private:
  options options_;
  std::string endpoint_;
  void connection_opened(mariadb_connection& connection);
  std::string prepare_caller_session(st_mysql* conn,
                                     std::chrono::steady_clock::time_point deadline);
  void creation_answered(const query_result& r);
  /// Runs `sql` on a pooled connection from a caller's thread and waits for its answer;
  /// throws its failure as an acquire of `name` would.
  query_result query_now(std::string sql, const std::string& name);
  void require_grant_table(const char* operation) const;
  std::vector<lock_party> holders_from_locks(const std::string& name,
                                             const std::set<std::string>& recorded);

  statement_settings statements_;
  std::mutex board_mutex_;
  std::weak_ptr<election_board> board_;  // guarded by board_mutex_
  // The fencing sequence and the semaphore, election and grant tables exist.
  std::atomic<bool> objects_created_{false};
  std::shared_ptr<session_pool> pool_;
  std::shared_ptr<session_keepalive<session_pool>> keepalive_;
  std::shared_ptr<caller_sessions> callers_;
};

/// A grant on one connection, given back with its RELEASE_LOCK statement.
using mysql_lease = pooled_lease<mysql_backend, mysql_session>;

/// A grant on one caller-driven connection, given back on the releasing thread.
using mysql_caller_lease = caller_lease<mysql_backend, caller_sessions::session>;

}  // namespace dlock::mysql::detail
