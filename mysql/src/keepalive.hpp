// Private to dlock::mysql: the round trips that find a silent connection or a lock gone.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "session_pool.hpp"

namespace dlock::mysql::detail {

/// Probes the connections of a pool every half period with one statement that also asks
/// IS_USED_LOCK of every lock the connection holds: a lock no longer held by this connection
/// marks its handles lost, and a connection whose probe went unanswered for a whole period is
/// given up (its handles lost): a break is noticed at most one and a half periods after it
/// happened. The probes also reset the server's wait_timeout (the server lease).
///
/// A connection waiting in GET_LOCK cannot answer; while waits run, the server is probed on
/// another connection (opened if there is none), and every wait fails once the server has
/// answered no probe for a whole period. Io thread only, except start().
class keepalive : public std::enable_shared_from_this<keepalive> {
 public:
  keepalive(boost::asio::any_io_executor executor, std::weak_ptr<session_pool> pool,
            std::chrono::nanoseconds period);

  /// Starts ticking; runs until the executor stops or the pool is gone.
  void start();

 private:
  using time_point = std::chrono::steady_clock::time_point;

  void schedule();
  void probe();
  void send_probe(const std::shared_ptr<mysql_session>& session, time_point now);
  void watch_waits(session_pool& pool, bool server_probed, time_point now);

  boost::asio::steady_timer timer_;
  std::weak_ptr<session_pool> pool_;
  std::chrono::nanoseconds period_;
  time_point heard_{};                     // the server's last answer to a probe
  std::optional<time_point> waits_since_;  // since when waits have been running
};

}  // namespace dlock::mysql::detail
