// A held lock whose provider's threads are blocked past its validity: core's clock, not the
// provider, reports the loss (lease.hpp, grant_validity). For the contract suite's
// lost_by_clock_test.cpp and the timing cases of the leased backends.
#pragma once

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/distributed_lock.hpp>
#include <dlock/core/distributed_reader_writer_lock.hpp>
#include <dlock/core/metrics_sink.hpp>
#include <dlock/core/provider.hpp>

#include "support.hpp"

namespace support {

/// A metrics sink that blocks the thread reporting the end of an acquire of `name` until
/// let_go(): for a backend that completes acquires on its network thread, that thread.
class acquire_end_blocker final : public dlock::metrics_sink {
 public:
  explicit acquire_end_blocker(std::string name) : name_(std::move(name)) {}

  void acquire_ended(const dlock::lock_labels& lock, dlock::acquire_outcome,
                     std::chrono::nanoseconds) noexcept override {
    if (lock.name != name_) return;
    blocking_ = true;
    let_go_.wait(false);
    blocking_ = false;
  }
  void released(const dlock::lock_labels&, std::chrono::nanoseconds, bool,
                bool) noexcept override {}
  void lost(const dlock::lock_labels&) noexcept override {}
  void extension_failed(std::string_view) noexcept override {}
  void reconnected(std::string_view) noexcept override {}

  const std::string& name() const noexcept { return name_; }
  bool blocking() const noexcept { return blocking_; }
  void let_go() noexcept {
    let_go_ = true;
    let_go_.notify_all();
  }

 private:
  std::string name_;
  std::atomic<bool> blocking_{false};
  std::atomic<bool> let_go_{false};
};

/// Blocks the provider's thread that completes acquires, from construction until let_go() or
/// destruction: an async try_acquire of a name of its own, whose end the metrics sink holds.
/// The acquire is started from a thread of this object's, so that a backend that completes it
/// on the starting thread (memory, files) blocks that one, not the test's. Whatever fails, the
/// thread goes on at destruction, or the provider could never shut down.
class blocked_provider_thread {
 public:
  explicit blocked_provider_thread(dlock::provider& provider)
      : provider_(provider),
        blocker_(std::make_shared<acquire_end_blocker>(unique_name("blocker"))) {
    using namespace std::chrono_literals;
    provider_.set_metrics_sink(blocker_);
    starter_ = std::thread([this, ended = ended_] {
      try {
        provider_.create_lock(blocker_->name())
            .async_try_acquire(0s, {}, [ended](std::exception_ptr,
                                               std::optional<dlock::lock_handle>) {
              ended->set_value();
            });
      } catch (...) {
        ended->set_exception(std::current_exception());
      }
    });
    if (!wait_until([&] { return blocker_->blocking() || ended_ready(); }, 10s) ||
        !blocker_->blocking()) {
      let_go();
      provider_.set_metrics_sink(nullptr);
      if (ended_ready()) ended_future_.get();  // the acquire's own error, if it threw one
      FAIL("the provider never reported the end of the blocking acquire");
    }
  }
  ~blocked_provider_thread() {
    let_go();
    provider_.set_metrics_sink(nullptr);
  }
  blocked_provider_thread(const blocked_provider_thread&) = delete;
  blocked_provider_thread& operator=(const blocked_provider_thread&) = delete;

  bool blocking() const noexcept { return blocker_->blocking(); }

  /// Lets the thread go; returns whether the blocking acquire then ended within 10 s.
  bool let_go() {
    using namespace std::chrono_literals;
    blocker_->let_go();
    if (starter_.joinable()) starter_.join();
    return ended_future_.wait_for(10s) == std::future_status::ready;
  }

 private:
  bool ended_ready() const {
    return ended_future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  dlock::provider& provider_;
  std::shared_ptr<acquire_end_blocker> blocker_;
  std::shared_ptr<std::promise<void>> ended_ = std::make_shared<std::promise<void>>();
  std::shared_future<void> ended_future_ = ended_->get_future().share();
  std::thread starter_;
};

/// How a test holds a grant of `provider` under `name`: a lock, a write lock, ...
using grant_holder = std::function<dlock::lock_handle(dlock::provider&, const std::string& name)>;

/// A lock, acquired asynchronously: on the provider's own threads (PostgreSQL's blocking
/// acquire runs on the caller's thread, on sessions without a validity yet).
inline dlock::lock_handle hold_lock(dlock::provider& provider, const std::string& name) {
  using namespace std::chrono_literals;
  return provider.create_lock(name).async_acquire(10s, {}, boost::asio::use_future).get();
}

/// A write lock, whose handle holds the name's upgrade gate and a write grant (core's gated
/// lease), acquired as hold_lock() does.
inline dlock::lock_handle hold_write(dlock::provider& provider, const std::string& name) {
  using namespace std::chrono_literals;
  return provider.create_reader_writer_lock(name)
      .async_acquire_write(10s, {}, boost::asio::use_future)
      .get();
}

/// Holds a grant of `provider` (`hold`), whose grants must be valid for a few seconds only (a
/// short lease or keepalive), blocks the provider's thread that completes acquires, and checks
/// that lost(), lost_token() and on_lost report the loss once the grant's validity has passed,
/// never before, within `latency` of it, while that thread is still blocked.
inline void check_lost_by_clock_while_blocked(dlock::provider& provider,
                                              std::chrono::milliseconds latency,
                                              const grant_holder& hold = hold_lock) {
  using namespace std::chrono_literals;
  using steady = std::chrono::steady_clock;
  dlock::lock_handle held = hold(provider, unique_name("held"));
  blocked_provider_thread blocked(provider);

  // Renewals are confirmed on the blocked thread: the validity stays where it is now.
  const steady::time_point until = dlock::granted_lease(held)->valid_until();
  REQUIRE(until != steady::time_point::max());
  std::atomic<steady::rep> token_stopped_at{0};
  std::stop_callback<std::function<void()>> token_watch(held.lost_token(), [&] {
    token_stopped_at = steady::now().time_since_epoch().count();
  });
  std::atomic<steady::rep> callback_ran_at{0};
  std::atomic<bool> ran_while_blocked{false};
  held.on_lost([&] {
    ran_while_blocked = blocked.blocking();
    callback_ran_at = steady::now().time_since_epoch().count();
  });
  if (steady::now() < until) CHECK(held.held());

  REQUIRE(wait_until([&] { return callback_ran_at != 0 && token_stopped_at != 0; },
                     std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now()) +
                         10s));
  CHECK(held.lost());
  CHECK(blocked.blocking());
  CHECK(ran_while_blocked);
  const auto token_stopped = steady::time_point(steady::duration(token_stopped_at));
  const auto callback_ran = steady::time_point(steady::duration(callback_ran_at));
  CHECK(token_stopped >= until);
  CHECK(callback_ran >= until);
  CHECK(token_stopped - until <= latency);
  CHECK(callback_ran - until <= latency);
  using ms = std::chrono::duration<double, std::milli>;
  std::cout << "lost by the clock with the provider's thread blocked: lost_token() stopped "
            << ms(token_stopped - until).count() << " ms and on_lost ran "
            << ms(callback_ran - until).count() << " ms after the validity's end\n";

  CHECK(blocked.let_go());
}

}  // namespace support
