// The paused holder of docs/fencing.md: a process that holds a lock, is stopped past its lease,
// and writes with its old fencing token once resumed, after a newer holder wrote.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <dlock/core.hpp>

namespace support {

struct paused_holder_steps {
  /// While the helper holds the lock and before it is stopped (e.g. to find its node).
  std::function<void(std::uint64_t token)> while_held = [](std::uint64_t) {};
  /// With the newer holder's grant, while the helper is still stopped: its write.
  std::function<void(const dlock::lock_handle& newer)> newer_writes;
  /// After the helper was resumed, still believing it holds the lock until it notices: the
  /// write with its old token, which the resource must refuse.
  std::function<void(std::uint64_t stale_token)> stale_writes;
};

/// Runs the scenario: a dlock-test-helper process takes the lock `name` through `url`, is
/// stopped with SIGSTOP, `successor` acquires `name` (waiting up to `lease_timeout` for the
/// stopped holder's lease to run out, which checks that the new token is higher), the steps
/// run, and the resumed helper must report "lost". Its provider then acquires again as a
/// fresh client would: refused while `successor` holds, granted with a higher token after it
/// released; and the helper ends once told to.
void run_paused_holder(const std::string& url, const std::string& name,
                       dlock::provider& successor, std::chrono::milliseconds lease_timeout,
                       const paused_holder_steps& steps);

}  // namespace support
