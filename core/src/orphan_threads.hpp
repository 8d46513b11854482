// Private to core: what becomes of a thread told to stop from inside itself (the last handle
// released in a completion handler, an election observer stopped from its callback). It
// cannot join itself, so it is detached; but a detached thread could still be running while
// exit() destroys static objects it uses. So the process waits at exit, before those are
// destroyed, until every such thread has said it finished.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

namespace dlock::detail {

/// Detaches `thread`, which sets `*finished` (and notifies it) as the last thing it does, and
/// has exit() wait for that. Called on that thread.
void detach_until_exit(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished);

/// What such a thread runs last.
inline void say_finished(std::atomic<bool>& finished) noexcept {
  finished.store(true, std::memory_order_release);
  finished.notify_all();
}

}  // namespace dlock::detail
