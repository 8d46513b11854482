// Private to dlock::postgres: the backend behind dlock::postgres::provider.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/postgres/provider.hpp>

#include "pg_connection.hpp"

namespace dlock::postgres::detail {

class pg_acquire;

/// A pooled connection and what it holds. Touched only on the io thread.
struct pg_session {
  std::shared_ptr<pg_connection> connection;
  struct grant {
    std::string resource;
    std::stop_source lost;
  };
  std::map<std::uint64_t, grant> grants;  // by grant id
  // Resources of attempts sent but not answered yet: advisory locks are re-entrant per session,
  // so a second attempt of one of them on this session would be granted too.
  std::multiset<std::string> attempting;
  bool reserved = false;                  // a waiting acquire runs on it
  // When the unanswered keepalive probe was sent; empty when none is outstanding.
  std::optional<std::chrono::steady_clock::time_point> probe_sent;

  bool holds(const std::string& resource) const;
  /// Holds `resource` or has an attempt of it in flight.
  bool holds_or_attempts(const std::string& resource) const;
};

/// libpq connection parameters, kept alive for PQconnectStartParams.
struct connection_parameters {
  std::vector<std::string> keywords, values;
};

/// The pool of sessions, the keepalive and the semaphore waiters. All its state lives on the
/// io thread; start_acquire and releases post there.
class postgres_backend final : public dlock::backend,
                               public std::enable_shared_from_this<postgres_backend> {
 public:
  /// Throws std::invalid_argument for a bad option or connection string (naming it).
  explicit postgres_backend(options opts);
  ~postgres_backend() override;

  std::string_view scheme() const noexcept override { return "postgres"; }
  std::string endpoint() const override { return endpoint_; }
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;

  /// Starts the keepalive; called once the backend is owned by a shared_ptr.
  void start() override;

  const options& settings() const noexcept { return options_; }

  // io thread only:
  /// A session on which `resource` may be tried at once: not reserved, neither holding nor
  /// attempting it. The caller records its attempt in the session's `attempting`.
  std::shared_ptr<pg_session> session_for_attempt(const std::string& resource);
  /// A session that holds nothing, reserved for a waiting acquire.
  std::shared_ptr<pg_session> session_for_wait();
  /// Ends a wait's reservation; closes the session if it holds nothing and is not needed.
  void unreserve(const std::shared_ptr<pg_session>& session);
  std::uint64_t add_grant(pg_session& session, std::string resource, std::stop_source lost);
  /// Removes the grant and runs `unlock_sql` unless the session is gone (which freed it);
  /// `done` gets an error message, empty on success.
  void release_grant(std::shared_ptr<pg_session> session, std::uint64_t grant_id,
                     std::string unlock_sql,
                     std::function<void(std::string error)> done);
  void add_notify_waiter(const std::string& channel, std::weak_ptr<pg_acquire> waiter);
  void remove_notify_waiter(const std::string& channel, const pg_acquire* waiter);

  /// `nextval('seq')`, or `0` without fencing.
  const std::string& token_expression() const noexcept { return token_expression_; }

 private:
  std::shared_ptr<pg_session> open_session();
  void forget_broken_sessions();
  void session_broken(const std::shared_ptr<pg_session>& session);
  void notified(const std::string& channel);
  void retire_if_spare(const std::shared_ptr<pg_session>& session);
  void schedule_keepalive();
  void keepalive();

  options options_;
  connection_parameters parameters_;
  std::vector<const char*> keyword_pointers_, value_pointers_;
  std::string endpoint_;
  std::string token_expression_;
  bool fencing_sequence_created_ = false;
  std::optional<boost::asio::steady_timer> keepalive_timer_;
  std::vector<std::shared_ptr<pg_session>> sessions_;
  std::uint64_t next_grant_id_ = 1;
  std::multimap<std::string, std::weak_ptr<pg_acquire>> notify_waiters_;
};

/// Parses a libpq connection string; returns "host:port/dbname" for messages (never the
/// password). Throws std::invalid_argument naming connection_string when libpq rejects it.
std::string describe_connection_string(const std::string& connection_string);

}  // namespace dlock::postgres::detail
