// Private to dlock::postgres: the semaphore waiters to wake when their channel is notified.
#pragma once

#include <map>
#include <memory>
#include <string>

namespace dlock::postgres::detail {

class pg_acquire;

/// Semaphore acquires that LISTEN on a channel, by channel: a NOTIFY arrives on whichever
/// session listens, so the backend routes it here. Io thread only.
class notify_waiters {
 public:
  void add(const std::string& channel, std::weak_ptr<pg_acquire> waiter);
  void remove(const std::string& channel, const pg_acquire* waiter);
  /// Tells every live waiter on `channel` to attempt again.
  void notify(const std::string& channel);

 private:
  std::multimap<std::string, std::weak_ptr<pg_acquire>> waiters_;
};

}  // namespace dlock::postgres::detail
