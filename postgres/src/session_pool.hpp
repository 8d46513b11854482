// Private to dlock::postgres: the provider's sessions, opened as needed and shared by locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/postgres/options.hpp>

#include "connection_string.hpp"
#include "session.hpp"
#include "session_books.hpp"

namespace dlock::postgres::detail {

/// What every session runs first: `required` (a session where it fails is given up, failing
/// what was queued on it with the server's message), then `optional` (errors ignored).
struct session_setup {
  std::string required;
  std::string optional;
};

/// The sessions of one provider and the grants they carry.
///
/// Attempts share sessions, but never one that holds or attempts the same resource (advisory
/// locks are re-entrant per session) nor one with locks_per_session grants; a waiting acquire
/// reserves a session that holds nothing. One session that holds nothing is kept for the next
/// acquire. A broken session goes, and the grants on it are signalled lost.
///
/// Everything runs on the io thread (the executor's). Waits, releases and spare sessions are
/// core's session_books.
class session_pool : public std::enable_shared_from_this<session_pool>,
                     public session_books<session_pool, pg_session> {
 public:
  /// What the pool tells its owner, on the io thread.
  struct hooks {
    /// A session was opened: statements queued on it here run before any other.
    std::function<void(pg_connection&)> opened;
    /// A NOTIFY on `channel` arrived on one of the sessions.
    std::function<void(const std::string& channel)> notified;
    /// How the sessions' waits are cancelled (pg_connection::set_canceller).
    canceller cancel;
  };

  /// `setup` runs first on every session (the server_lease's settings).
  session_pool(boost::asio::any_io_executor executor, const options& opts, std::string endpoint,
               session_setup setup, hooks hooks);

  /// A session on which `resource` may be tried at once: not reserved, neither holding nor
  /// attempting it. The caller records its attempt in the session's `attempting`.
  std::shared_ptr<pg_session> session_for_attempt(const std::string& resource);

 private:
  friend class session_books<session_pool, pg_session>;
  std::shared_ptr<pg_session> open_session();

  boost::asio::any_io_executor executor_;
  std::string endpoint_;
  session_setup setup_;
  connection_parameters parameters_;
  std::chrono::nanoseconds connect_timeout_;
  std::uint32_t locks_per_session_;
  hooks hooks_;
};

}  // namespace dlock::postgres::detail
