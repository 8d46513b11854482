// Private to dlock::redis: hears a Sentinel deployment's failover announcements.
#pragma once

#include <cstddef>
#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "connection.hpp"
#include "sentinel_master.hpp"

namespace dlock::redis::detail {

/// Subscribes to `+switch-master` on one sentinel (the next one when its connection drops, after
/// asking it where the master is, so that a switch announced meanwhile is not missed) and
/// reports every switch of the provider's master to sentinel_master::switched.
///
/// Everything runs on the executor it was made with (the backend's network thread).
/// Lifetime: a member of the backend, destroyed after the network thread stopped.
class sentinel_follower {
 public:
  sentinel_follower(boost::asio::any_io_executor executor,
                    std::shared_ptr<sentinel_master> master);
  ~sentinel_follower();

  /// Starts following, once (later calls do nothing).
  void start();

 private:
  void follow(std::size_t n);
  void message(const reply& message);
  void lost();

  boost::asio::any_io_executor executor_;
  std::shared_ptr<sentinel_master> master_;
  std::unique_ptr<connection> link_;
  boost::asio::steady_timer pause_;
  bool started_ = false;
  bool retrying_ = false;
  std::size_t turn_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlock::redis::detail
