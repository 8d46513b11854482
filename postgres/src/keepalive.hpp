// Private to dlock::postgres: the round trips that find a silent session.
#pragma once

#include <chrono>
#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "session_pool.hpp"

namespace dlock::postgres::detail {

/// Probes every session of a pool that holds locks or runs a statement with `SELECT 1`, and
/// gives up a session whose probe went unanswered for a whole period: a break is noticed at
/// most one and a half periods after it happened. Io thread only, except start().
class keepalive : public std::enable_shared_from_this<keepalive> {
 public:
  keepalive(boost::asio::any_io_executor executor, std::weak_ptr<session_pool> pool,
            std::chrono::nanoseconds period);

  /// Starts ticking; runs until the executor stops or the pool is gone.
  void start();

 private:
  void schedule();
  void probe();

  boost::asio::steady_timer timer_;
  std::weak_ptr<session_pool> pool_;
  std::chrono::nanoseconds period_;
};

}  // namespace dlock::postgres::detail
