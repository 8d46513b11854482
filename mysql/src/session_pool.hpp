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
#include "session_books.hpp"

namespace dlock::mysql::detail {

/// The connections of one provider and the grants they carry.
///
/// Attempts share connections, but never one that holds or attempts the same resource (named
/// locks are re-entrant per connection); a waiting acquire reserves a connection that holds
/// nothing. One connection that holds nothing is kept for the next acquire. A broken
/// connection goes, and the grants on it are signalled lost. Io thread only. Waits, releases
/// and spare connections are core's session_books.
class session_pool : public std::enable_shared_from_this<session_pool>,
                     public session_books<session_pool, mysql_session> {
 public:
  /// `setup` runs first on every connection (the server lease); a connection where it fails
  /// is given up. Then `opened` runs: statements it queues run before any other.
  session_pool(boost::asio::any_io_executor executor, const options& opts, std::string endpoint,
               std::string setup, std::function<void(mariadb_connection&)> opened);

  /// A connection on which `resource` may be tried at once: not reserved, neither holding nor
  /// attempting it. The caller records its attempt in the session's `attempting`.
  std::shared_ptr<mysql_session> session_for_attempt(const std::string& resource);
  /// The keepalive's probe: one round trip that also asks IS_USED_LOCK of every lock
  /// `session` holds and marks lost the grants whose lock is no longer this connection's.
  /// `answered` gets whether the server answered.
  void probe(const std::shared_ptr<mysql_session>& session,
             dlock::detail::unique_function<void(bool)> answered);

 private:
  friend class session_books<session_pool, mysql_session>;
  std::shared_ptr<mysql_session> open_session();

  boost::asio::any_io_executor executor_;
  options options_;
  std::string endpoint_;
  std::string setup_;
  std::function<void(mariadb_connection&)> opened_;
};

}  // namespace dlock::mysql::detail
