// Private to core: a home for a thread that was told to stop from inside itself (the last
// handle released in a completion handler, an election observer stopped from its callback).
// It cannot join itself, and a detached thread could still run while exit() destroys what it
// uses. The reaper keeps it joinable instead, joins it once it has finished (at the next
// hand-over), and joins every one left when the process exits.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

namespace dlock::detail {

/// Takes `thread`, which sets `*finished` as the last thing it does. Called on that thread.
void hand_to_reaper(std::thread thread, std::shared_ptr<const std::atomic<bool>> finished);

}  // namespace dlock::detail
