#include "notify_waiters.hpp"

#include <vector>

#include "acquire.hpp"

namespace dlock::postgres::detail {

void notify_waiters::add(const std::string& channel, std::weak_ptr<pg_acquire> waiter) {
  waiters_.emplace(channel, std::move(waiter));
}

void notify_waiters::remove(const std::string& channel, const pg_acquire* waiter) {
  auto [first, last] = waiters_.equal_range(channel);
  for (auto it = first; it != last; ++it) {
    auto locked = it->second.lock();
    if (!locked || locked.get() == waiter) {
      waiters_.erase(it);
      return;
    }
  }
}

void notify_waiters::notify(const std::string& channel) {
  std::vector<std::shared_ptr<pg_acquire>> waiting;
  auto [first, last] = waiters_.equal_range(channel);
  for (auto it = first; it != last; ++it) {
    if (auto waiter = it->second.lock()) waiting.push_back(std::move(waiter));
  }
  for (auto& waiter : waiting) waiter->notified();
}

}  // namespace dlock::postgres::detail
