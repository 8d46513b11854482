// Private to dlock::mysql: the backend behind dlock::mysql::provider.
//
// Where to start: mysql_acquire (acquire.hpp) is one acquire from attempt to grant; it takes
// connections from the session_pool, which core's session_keepalive probes; a grant is a
// mysql_lease (core's pooled_lease); the
// SQL is in statements.hpp, the server names in lock_name.hpp, and every connection is a
// mariadb_connection over Connector/C's non-blocking calls.
#pragma once

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

#include "connection.hpp"
#include "pooled_lease.hpp"
#include "session_keepalive.hpp"
#include "session_pool.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

/// The pool of connections and its keepalive. All its state lives on the io thread;
/// start_acquire and releases post there.
class mysql_backend final : public dlock::backend,
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

  /// Makes the pool and starts its keepalive. Connects nothing yet.
  void start() override;
  /// Not connected while the server leaves the keepalive unanswered (health.hpp).
  provider_health health() const override {
    return keepalive_ ? keepalive_->health(*this) : provider_health{};
  }

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

  // io thread only:
  session_pool& sessions() noexcept { return *pool_; }

 private:
  options options_;
  std::string endpoint_;
  void connection_opened(mariadb_connection& connection);
  /// Runs `sql` on a pooled connection from a caller's thread and waits for its answer;
  /// throws its failure as an acquire of `name` would.
  query_result query_now(std::string sql, const std::string& name);
  void require_grant_table(const char* operation) const;
  std::vector<lock_party> holders_from_locks(const std::string& name,
                                             const std::set<std::string>& recorded);

  statement_settings statements_;
  std::mutex board_mutex_;
  std::weak_ptr<election_board> board_;  // guarded by board_mutex_
  bool objects_created_ = false;  // the fencing sequence and semaphore table; io thread
  std::shared_ptr<session_pool> pool_;
  std::shared_ptr<session_keepalive<session_pool>> keepalive_;
};

/// A grant on one connection, given back with its RELEASE_LOCK statement.
using mysql_lease = pooled_lease<mysql_backend, mysql_session>;

}  // namespace dlock::mysql::detail
