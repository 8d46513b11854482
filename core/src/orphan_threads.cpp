#include "orphan_threads.hpp"

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

namespace dlock::detail {

namespace {

struct orphan {
  std::thread::id id;
  std::shared_ptr<const std::atomic<bool>> finished;
};

struct orphan_list {
  std::mutex mutex;
  std::vector<orphan> orphans;
};

// Never destroyed: a thread may still detach itself while, or after, exit() waits.
orphan_list& orphans() {
  static auto* const list = new orphan_list;
  return *list;
}

// Registered with atexit() at the first detach, so it runs before every static object made
// earlier is destroyed, which the orphans may still use. An orphan stuck in a user's handler
// holds exit up until it returns, as a join would. (Waited for rather than joined: a process
// that ends with _exit skips this, and a finished thread nobody joined would count as leaked.)
void wait_for_orphans() {
  std::vector<orphan> left;
  {
    std::lock_guard lock(orphans().mutex);
    left.swap(orphans().orphans);
  }
  for (const auto& o : left) {
    // exit() called by an orphan itself: it cannot wait for its own end.
    if (o.id == std::this_thread::get_id()) continue;
    o.finished->wait(false, std::memory_order_acquire);
  }
}

}  // namespace

void detach_until_exit(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished) {
  static const bool waited_for_at_exit = std::atexit(wait_for_orphans) == 0;
  (void)waited_for_at_exit;
  const auto id = thread.get_id();
  thread.detach();
  std::lock_guard lock(orphans().mutex);
  std::erase_if(orphans().orphans,
                [](const orphan& o) { return o.finished->load(std::memory_order_acquire); });
  orphans().orphans.push_back({id, std::move(finished)});
}

}  // namespace dlock::detail
