#include "watchdog.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

/// A node that extended the lease (1); 0 is "not ours".
bool extension_confirmed(const command_result& r) {
  return !r.failure && r.value.type == reply::kind::integer && r.value.integer == 1;
}

}  // namespace

watchdog::watchdog(redis_backend& owner) : owner_(owner) {
  timer_.emplace(owner_.network_executor());
}

void watchdog::watch(std::shared_ptr<held_grant> grant) {
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    held_.push_back(std::move(grant));
    if (!running_) {
      running_ = true;
      start = true;
    }
  }
  if (start) {
    // The timer belongs to the network thread; a grant may come from the caller's.
    // Weakly: a strong reference queued on its own network thread would keep the backend
    // (and that thread) alive forever.
    boost::asio::post(owner_.network_executor(), [this, weak = owner_.weak_from_this()] {
      if (auto alive = weak.lock()) {
        next_extension_ = clock::now() + owner_.settings().extend_every;
        schedule();
      }
    });
  }
}

void watchdog::verify_now() {
  boost::asio::post(owner_.network_executor(), [this, weak = owner_.weak_from_this()] {
    auto alive = weak.lock();
    if (!alive) return;
    {
      std::lock_guard lock(mutex_);
      if (!running_) return;
    }
    next_extension_ = clock::now();
    schedule();
  });
}

void watchdog::forget(const std::shared_ptr<held_grant>& grant) {
  std::lock_guard lock(mutex_);
  grant->registered = false;
  std::erase(held_, grant);
  std::erase(ran_out_, grant);
}

void watchdog::schedule() {
  clock::time_point wake = next_extension_;
  {
    std::lock_guard lock(mutex_);
    for (const auto& grant : held_) wake = std::min(wake, grant->validity->until());
  }
  timer_->expires_at(wake);
  timer_->async_wait([this, weak = owner_.weak_from_this()](const boost::system::error_code& error) {
    if (error) return;
    if (auto alive = weak.lock()) tick();
  });
}

void watchdog::tick() {
  const auto now = clock::now();
  std::vector<std::shared_ptr<held_grant>> to_extend;
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    // A grant whose validity passed unconfirmed may already belong to someone else.
    std::erase_if(held_, [&](const std::shared_ptr<held_grant>& grant) {
      if (!grant->validity->passed(now)) return false;
      grant->registered = false;
      lost.push_back(grant->lost);
      ran_out_.push_back(grant);
      return true;
    });
    if (held_.empty()) {
      running_ = false;
    } else if (now >= next_extension_) {
      to_extend = held_;
    }
  }
  for (auto& signal : lost) signal.request_stop();
  if (!to_extend.empty()) {
    next_extension_ = now + owner_.settings().extend_every;
    // Issued back to back, the extensions leave in one write per server: a pipelined batch.
    for (const auto& grant : to_extend) extend(grant);
  }
  bool running;
  {
    std::lock_guard lock(mutex_);
    running = running_;
  }
  if (running) schedule();
}

void watchdog::extend(const std::shared_ptr<held_grant>& grant) {
  const auto sent = clock::now();
  const auto expiry = owner_.settings().expiry;
  owner_.nodes().eval_everywhere(
      extend_script(), grant->keys,
      {grant->token, std::string(script_argument(grant->keys.kind)),
       milliseconds_argument(expiry), grant->keys.hold},
      {owner_.nodes().quorum(grant->keys.kind), extension_confirmed},
      [this, weak = owner_.weak_from_this(), grant, sent](std::vector<command_result> results) {
        auto alive = weak.lock();
        if (!alive) return;
        std::size_t confirmed = 0, not_ours = 0;
        for (const auto& r : results) {
          if (r.failure || r.value.type != reply::kind::integer) continue;
          (r.value.integer == 1 ? confirmed : not_ours) += 1;
        }
        node_set& nodes = owner_.nodes();
        bool lost = false;
        {
          std::lock_guard lock(mutex_);
          if (!grant->registered) return;  // released or lost meanwhile
          const std::size_t quorum = nodes.quorum(grant->keys.kind);
          if (confirmed >= quorum) {
            grant->validity->extend_to(valid_until(sent, owner_.settings().expiry));
            return;
          }
          // "Not ours" from enough nodes that a quorum can no longer confirm: gone now.
          if (not_ours > nodes.size() - quorum) {
            grant->registered = false;
            std::erase(held_, grant);
            lost = true;
          }
        }
        if (lost) {
          grant->lost.request_stop();
          return;
        }
        owner_.events().extension_failed();
        owner_.events().background_error(std::make_exception_ptr(connection_error(
            owner_.message("lease extension failed: " + nodes.failures(results), grant->name))));
      });
}

std::size_t watchdog::overdue(std::chrono::steady_clock::time_point now,
                              std::chrono::nanoseconds overdue_below) const {
  std::lock_guard lock(mutex_);
  std::size_t late = ran_out_.size();
  for (const auto& grant : held_) {
    if (grant->validity->until() - now < overdue_below) ++late;
  }
  return late;
}

}  // namespace dlock::redis::detail
