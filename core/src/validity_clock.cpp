// The clock thread (see validity_clock.hpp), and the part of lease that uses it.
//
// One thread for the process, not one per provider: a provider's threads may be the very ones
// that are blocked or starved when a grant runs out. It starts with the first lease bounded by
// the clock, sleeps on a condition variable until the earliest validity ends (an idle process
// has it asleep with no timer), and is joined at exit(): an atexit handler registered when it
// starts runs before the static objects made earlier are destroyed.
#include "validity_clock.hpp"

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

namespace dlock::detail {

namespace {

using clock = grant_validity::clock;

class validity_clock;
validity_clock& the_clock();

thread_local bool on_clock_thread = false;

struct watched {
  std::shared_ptr<const grant_validity> validity;
  std::stop_source lost;
  clock::time_point wake;  // its place in the schedule
};

class validity_clock {
 public:
  std::uint64_t watch(std::shared_ptr<const grant_validity> validity, std::stop_source lost) {
    std::lock_guard lock(mutex_);
    const std::uint64_t ticket = next_ticket_++;
    const clock::time_point wake = validity->until();
    watched_.emplace(ticket, watched{std::move(validity), std::move(lost), wake});
    schedule_.emplace(wake, ticket);
    if (!started_ && !closing_) {
      start();
    } else if (wake < sleeps_until_) {
      // Only when the thread would sleep past it (run() says why it mostly does not).
      wakeup_.notify_one();
    }
    return ticket;
  }

  void unwatch(std::uint64_t ticket) noexcept {
    std::lock_guard lock(mutex_);
    auto found = watched_.find(ticket);
    if (found == watched_.end()) return;  // found lost already
    schedule_.erase({found->second.wake, ticket});
    watched_.erase(found);
  }

  void close_at_exit() {
    std::thread thread;
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      thread = std::move(thread_);
    }
    wakeup_.notify_one();
    if (!thread.joinable()) return;
    // exit() called from a loss callback on the clock thread itself: it cannot join itself.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }

 private:
  // With the mutex held. Without a thread (the process has none left) lost() still reads the
  // clock; the next watch tries again.
  void start() {
    static const bool joined_at_exit = std::atexit([] { the_clock().close_at_exit(); }) == 0;
    (void)joined_at_exit;
    try {
      thread_ = std::thread([this] {
        on_clock_thread = true;
        run();
      });
      started_ = true;
    } catch (const std::system_error& e) {
      std::cerr << "dlock: cannot start the clock thread that marks leases lost when they run "
                   "out: "
                << e.what() << '\n';
    }
  }

  void run() {
    std::unique_lock lock(mutex_);
    // The end it slept toward last. When the lease it was for went before it (released), the
    // thread sleeps on until then rather than be woken: a grant made meanwhile ends later and
    // needs no wake-up (watch()), which a handoff's grant would otherwise cost.
    clock::time_point target = clock::time_point::min();
    while (!closing_) {
      const clock::time_point now = clock::now();
      if (schedule_.empty() || now < schedule_.begin()->first) {
        if (!schedule_.empty()) target = schedule_.begin()->first;
        if (now >= target) target = clock::time_point::max();
        sleeps_until_ = target;
        if (target == clock::time_point::max()) {
          wakeup_.wait(lock);
        } else {
          wakeup_.wait_until(lock, target);
        }
        sleeps_until_ = clock::time_point::min();
        continue;
      }
      const std::uint64_t ticket = schedule_.begin()->second;
      schedule_.erase(schedule_.begin());
      auto found = watched_.find(ticket);
      const clock::time_point until = found->second.validity->until();
      if (now < until) {  // renewed meanwhile
        found->second.wake = until;
        schedule_.emplace(until, ticket);
        continue;
      }
      std::stop_source lost = std::move(found->second.lost);
      watched_.erase(found);
      // Stop callbacks run here, without the mutex: they may release their handle.
      lock.unlock();
      lost.request_stop();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wakeup_;
  std::map<std::uint64_t, watched> watched_;
  std::set<std::pair<clock::time_point, std::uint64_t>> schedule_;
  std::uint64_t next_ticket_ = 1;
  bool started_ = false;
  bool closing_ = false;
  /// When the thread wakes by itself: max() while it waits for a notification, min() while
  /// it runs (it reads the schedule again before it sleeps, so it needs none).
  clock::time_point sleeps_until_ = clock::time_point::min();
  std::thread thread_;
};

// Never destroyed: a lease may be destroyed, and unwatched, after exit() joined the thread.
validity_clock& the_clock() {
  static auto* const clock = new validity_clock;
  return *clock;
}

}  // namespace

std::uint64_t watch_validity(std::shared_ptr<const grant_validity> validity,
                             std::stop_source lost) {
  return the_clock().watch(std::move(validity), std::move(lost));
}

void unwatch_validity(std::uint64_t ticket) noexcept { the_clock().unwatch(ticket); }

bool on_validity_clock_thread() noexcept { return on_clock_thread; }

}  // namespace dlock::detail

namespace dlock {

lease::lease(std::uint64_t fencing_token, std::shared_ptr<const grant_validity> validity)
    : fencing_token_(fencing_token), validity_(std::move(validity)) {
  if (validity_) clock_watch_ = detail::watch_validity(validity_, lost_source_);
}

void lease::stop_clock_watch() noexcept { detail::unwatch_validity(clock_watch_); }

}  // namespace dlock
