// Private to dlock::mysql: the provider's connections, opened as needed and shared by locks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/mysql/options.hpp>

#include "session.hpp"

namespace dlock::mysql::detail {

/// The connections of one provider and the grants they carry.
///
/// Attempts share connections, but never one that holds or attempts the same resource (named
/// locks are re-entrant per connection); a waiting acquire reserves a connection that holds
/// nothing. One connection that holds nothing is kept for the next acquire. A broken
/// connection goes, and the grants on it are signalled lost. Io thread only.
class session_pool : public std::enable_shared_from_this<session_pool> {
 public:
  /// `setup` runs first on every connection (the server lease); a connection where it fails
  /// is given up. Then `opened` runs: statements it queues run before any other.
  session_pool(boost::asio::any_io_executor executor, const options& opts, std::string endpoint,
               std::string setup, std::function<void(mariadb_connection&)> opened);

  /// A connection on which `resource` may be tried at once: not reserved, neither holding nor
  /// attempting it. The caller records its attempt in the session's `attempting`.
  std::shared_ptr<mysql_session> session_for_attempt(const std::string& resource);
  /// A connection that holds nothing, reserved for a waiting acquire.
  std::shared_ptr<mysql_session> session_for_wait();
  /// Ends a wait's reservation; closes the connection if it holds nothing and is not needed.
  void unreserve(const std::shared_ptr<mysql_session>& session);
  /// Closes `session` if it holds nothing, runs nothing and another such one is kept.
  void retire_if_spare(const std::shared_ptr<mysql_session>& session);

  /// Books a grant on `session`; returns its id. `lost` is signalled when the connection
  /// breaks or the keepalive finds the lock no longer ours.
  std::uint64_t add_grant(mysql_session& session, mysql_session::grant grant);
  /// Removes the grant and runs `unlock_sql` unless the connection is gone (which freed it);
  /// `done` gets an error message, empty on success. An unlock that fails ends the connection.
  void release_grant(std::shared_ptr<mysql_session> session, std::uint64_t grant_id,
                     std::string unlock_sql, std::function<void(std::string error)> done);

  const std::vector<std::shared_ptr<mysql_session>>& sessions() const noexcept {
    return sessions_;
  }

  /// The keepalive's probe: one round trip that also asks IS_USED_LOCK of every lock
  /// `session` holds and marks lost the grants whose lock is no longer this connection's.
  /// `answered` gets whether the server answered.
  void probe(const std::shared_ptr<mysql_session>& session,
             dlock::detail::unique_function<void(bool)> answered);

  /// Closes every connection: for the backend's destructor, once its thread has stopped.
  void close_all();

 private:
  std::shared_ptr<mysql_session> open_session();
  void forget_broken_sessions();
  void session_broken(const std::shared_ptr<mysql_session>& session);

  boost::asio::any_io_executor executor_;
  options options_;
  std::string endpoint_;
  std::string setup_;
  std::function<void(mariadb_connection&)> opened_;
  std::vector<std::shared_ptr<mysql_session>> sessions_;
  std::uint64_t next_grant_id_ = 1;
};

}  // namespace dlock::mysql::detail
