// What the fault tests of every server-backed backend share: timing a recovery, waiting for
// a server to grant again, and the silent-holder scenario (a holder process stopped with
// SIGSTOP keeps its TCP healthy, so only the server's lease can end its hold).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <dlock/core.hpp>

namespace support {

/// The seconds from `since` to now.
double seconds_since(std::chrono::steady_clock::time_point since);

/// Whether a fresh try_acquire of the lock `name` succeeds within 30 s, a connection_error
/// counting as "not yet": the server answers again after a fault, however long it takes.
bool acquires_again(dlock::provider& provider, const std::string& name);

/// What happened to the lock and its stopped holder.
struct silent_holder_outcome {
  std::uint64_t holder_token = 0;
  std::uint64_t contender_token = 0;
  double seconds_to_grant = 0;       ///< from the stop to the contender's grant
  std::optional<std::string> holder_heard;  ///< the holder's next line once resumed ("lost")
};

/// Starts `dlock-test-helper hold holder_url name lock`, makes `contender` wait for `name`,
/// stops the holder, waits up to 10 s for the contender's grant, then resumes the holder.
/// Throws std::runtime_error when the holder does not acquire, the contender does not start
/// waiting, or the grant does not come in time.
silent_holder_outcome silence_holder(const std::string& holder_url, dlock::provider& contender,
                                     const std::string& name);

}  // namespace support
