// Private to core: stop_grace for an acquire that a backend waits out on the caller's thread
// (backend::acquire_waiting_inline), where no acquire_machine runs: a token requested
// stop_grace after a stop, telling the backend to return now and let its withdrawal settle.
#pragma once

#include <memory>
#include <optional>
#include <stop_token>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "acquire_machine.hpp"

namespace dlock::detail {

class grace_after_stop {
 public:
  /// Nothing is allocated where no stop can come.
  grace_after_stop(const std::stop_token& stop, boost::asio::any_io_executor timers) {
    if (!stop.stop_possible()) return;
    give_up_.emplace();
    arm_.emplace(stop, arm{*give_up_, std::move(timers)});
  }
  grace_after_stop(const grace_after_stop&) = delete;
  grace_after_stop& operator=(const grace_after_stop&) = delete;

  /// Requested stop_grace after the stop (never without one).
  std::stop_token give_up() const { return give_up_ ? give_up_->get_token() : std::stop_token{}; }

 private:
  // Runs on the thread that requests the stop: the timer is the backend thread's, and owns
  // itself until it fires, so the wait may end (and this object go) before it does.
  struct arm {
    std::stop_source give_up;
    boost::asio::any_io_executor timers;
    void operator()() const noexcept {
      try {
        auto timer = std::make_shared<boost::asio::steady_timer>(timers, stop_grace);
        timer->async_wait([timer, give_up = give_up](const boost::system::error_code&) mutable {
          give_up.request_stop();
        });
      } catch (...) {
        std::stop_source now = give_up;  // no timer: the caller hears at once rather than never
        now.request_stop();
      }
    }
  };
  std::optional<std::stop_source> give_up_;
  std::optional<std::stop_callback<arm>> arm_;
};

}  // namespace dlock::detail
