// election::observe: one thread per observation reads the board when told of a change (or
// every poll period) and hands each new leader to the callback, in order. A thread rather
// than the provider's executor, since a board's read may block on its backend's own thread.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <dlock/core/backend/election.hpp>
#include <dlock/core/election.hpp>

#include "election_access.hpp"
#include "lock_service.hpp"
#include "orphan_threads.hpp"

namespace dlock {

namespace {

// What the board's watch pokes; shared so that a late poke finds it alive.
struct wake_up {
  std::mutex mutex;
  std::condition_variable changed;
  bool dirty = false;
  bool stopping = false;

  void poke() {
    {
      std::lock_guard lock(mutex);
      dirty = true;
    }
    changed.notify_one();
  }
};

}  // namespace

struct leader_observation::state {
  std::shared_ptr<wake_up> wake = std::make_shared<wake_up>();
  std::shared_ptr<void> watch;  // the board's subscription; reset before the thread stops
  std::thread thread;
  // Set by the thread as its last statement (orphan_threads.hpp).
  std::shared_ptr<std::atomic<bool>> finished = std::make_shared<std::atomic<bool>>(false);
};

namespace {

void observe_loop(const detail::election_target& target, const std::shared_ptr<wake_up>& wake,
                  const std::function<void(const std::optional<leader_info>&)>& on_change) {
  std::optional<std::optional<leader_info>> delivered;
  const auto period = target.board->poll_period();
  for (;;) {
    {
      std::lock_guard lock(wake->mutex);
      if (wake->stopping) return;
      wake->dirty = false;
    }
    try {
      std::optional<leader_info> now = target.board->leader(target.name);
      // Terms only rise: a read that raced a newer one seen before is not news.
      const bool older = now && delivered && *delivered && now->term < (*delivered)->term;
      if (!older && (!delivered || *delivered != now)) {
        on_change(now);
        delivered = std::move(now);
      }
    } catch (...) {
      target.service->report(std::current_exception());
    }
    std::unique_lock lock(wake->mutex);
    wake->changed.wait_for(lock, period, [&] { return wake->dirty || wake->stopping; });
  }
}

}  // namespace

leader_observation::leader_observation() noexcept = default;
leader_observation::leader_observation(std::shared_ptr<state> s) noexcept
    : state_(std::move(s)) {}
leader_observation::leader_observation(leader_observation&&) noexcept = default;

leader_observation& leader_observation::operator=(leader_observation&& other) noexcept {
  if (this != &other) {
    stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

leader_observation::~leader_observation() { stop(); }

void leader_observation::stop() noexcept {
  if (!state_) return;
  std::shared_ptr<state> s = std::move(state_);
  s->watch.reset();
  {
    std::lock_guard lock(s->wake->mutex);
    s->wake->stopping = true;
  }
  s->wake->changed.notify_one();
  if (s->thread.get_id() == std::this_thread::get_id()) {
    // Stopped from its own callback: the loop ends when it returns.
    detail::detach_until_exit(std::move(s->thread), s->finished);
  } else {
    s->thread.join();
  }
}

leader_observation election::observe(
    std::function<void(const std::optional<leader_info>&)> on_change) const {
  auto s = std::make_shared<leader_observation::state>();
  s->watch = target_.board->watch(target_.name, [wake = s->wake] { wake->poke(); });
  s->thread = std::thread([target = target_, wake = s->wake, on_change = std::move(on_change),
                           finished = s->finished]() mutable {
    observe_loop(target, wake, on_change);
    {
      // What the callback and the board hold goes before the thread says it is done.
      [[maybe_unused]] const auto dropped_target = std::move(target);
      [[maybe_unused]] const auto dropped_callback = std::move(on_change);
    }
    detail::say_finished(*finished);
  });
  return detail::election_access::make(std::move(s));
}

}  // namespace dlock
