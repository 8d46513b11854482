#include "thread_reaper.hpp"

#include <mutex>
#include <utility>
#include <vector>

namespace dlock::detail {

namespace {

struct orphan {
  std::thread thread;
  std::shared_ptr<const std::atomic<bool>> finished;
};

// Made at the first hand-over, so destroyed at exit before every static object made earlier,
// which the orphans may still use. A thread that is stuck in a user's handler holds exit up
// until it returns, as joining any thread would.
class reaper {
 public:
  reaper() = default;
  reaper(const reaper&) = delete;
  reaper& operator=(const reaper&) = delete;

  ~reaper() {
    std::vector<orphan> left;
    {
      std::lock_guard lock(mutex_);
      left.swap(orphans_);
    }
    for (auto& o : left) {
      // exit() called by an orphan itself: it is the thread running this very destructor.
      if (o.thread.get_id() == std::this_thread::get_id()) {
        o.thread.detach();
      } else {
        o.thread.join();
      }
    }
  }

  void adopt(orphan newcomer) {
    std::vector<orphan> done;
    {
      std::lock_guard lock(mutex_);
      for (auto it = orphans_.begin(); it != orphans_.end();) {
        if (it->finished->load(std::memory_order_acquire)) {
          done.push_back(std::move(*it));
          it = orphans_.erase(it);
        } else {
          ++it;
        }
      }
      orphans_.push_back(std::move(newcomer));
    }
    for (auto& o : done) o.thread.join();  // each has returned from its last statement
  }

 private:
  std::mutex mutex_;
  std::vector<orphan> orphans_;
};

}  // namespace

void hand_to_reaper(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished) {
  static reaper instance;
  instance.adopt({std::move(thread), std::move(finished)});
}

}  // namespace dlock::detail
