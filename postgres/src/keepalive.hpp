// Private to dlock::postgres: the round trips that find a silent session.
#pragma once

#include <atomic>

#include <chrono>
#include <memory>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "session_pool.hpp"

namespace dlock::postgres::detail {

/// Probes the sessions of a pool with `SELECT 1` every half period and gives up a session
/// whose probe went unanswered for a whole period: a break is noticed at most one and a half
/// periods after it happened. The probes also reset every session's idle_session_timeout on
/// the server (the server_lease), so only a client that has gone silent loses its session.
///
/// A session waiting in pg_advisory_lock cannot answer a probe; while waits run, the server
/// is probed on another session (opened if there is none), and every wait fails once the
/// server has answered no probe for a whole period. Io thread only, except start().
class keepalive : public std::enable_shared_from_this<keepalive> {
 public:
  keepalive(boost::asio::any_io_executor executor, std::weak_ptr<session_pool> pool,
            std::chrono::nanoseconds period);

  /// Starts ticking; runs until the executor stops or the pool is gone.
  void start();

  /// Since when the server has left a keepalive unanswered for half a period or more, until it
  /// answers one again (nullopt: it answers). Any thread; for provider::health().
  std::optional<std::chrono::steady_clock::time_point> silent_since() const noexcept;

 private:
  using time_point = std::chrono::steady_clock::time_point;

  void schedule();
  void probe();
  void send_probe(const std::shared_ptr<pg_session>& session, time_point now);
  void note_silence(time_point since) noexcept;
  void watch_waits(session_pool& pool, bool server_probed, time_point now);

  boost::asio::steady_timer timer_;
  std::weak_ptr<session_pool> pool_;
  std::chrono::nanoseconds period_;
  time_point heard_{};                    // the server's last answer to a probe
  // silent_since() as steady_clock ticks, 0 when the server answers. While it is set and no
  // session is left to probe, a probe opens one, so that the answer that clears it comes.
  std::atomic<std::int64_t> silent_since_{0};
  std::optional<time_point> waits_since_; // since when waits have been running
};

}  // namespace dlock::postgres::detail
