// Private to dlock::redis: an acquire on the network thread, waiting or not.
//
// Try; on "taken", subscribe to the name's release channel, try again once the subscription is
// confirmed (a release between the first try and the subscription would otherwise go unheard),
// then wait for a message, bounded by the time the holder's lease has left. With RedLock each
// try reads the fencing counters first and proposes one above the highest. What to do next is
// acquire_machine's decision (acquire_machine.hpp), and what a try's answers amount to is
// try_tally's; acquire.cpp only sends, listens, times and reports.
#pragma once

#include <memory>

#include <dlock/core/backend/backend.hpp>

namespace dlock::redis::detail {

class redis_backend;

/// Starts an acquire of `request` on `backend`'s network thread; `done` runs once there.
/// Returns the operation, so core can cancel it: cancel() withdraws it once the try in flight
/// answered (what that try won is given back), and `done` runs once the servers confirm.
std::shared_ptr<acquire_operation> start_acquire_on_network_thread(
    std::shared_ptr<redis_backend> backend, acquire_request request, acquire_completion done);

}  // namespace dlock::redis::detail
