// dlock/core/durations.hpp: the durations every backend and the user API agree on.
#pragma once

#include <chrono>

namespace dlock {

/// The default timeout of acquire(): wait as long as it takes.
inline constexpr std::chrono::nanoseconds forever = std::chrono::nanoseconds::max();

/// How long a networked backend's release (and any other call that blocks on its thread)
/// waits for the server by default before it throws connection_error; every networked
/// backend's options has a release_timeout field with this default (URL option
/// `release_timeout`). The server then frees the lock by its own means (lease expiry,
/// session end, connection close), as its backend page says.
inline constexpr std::chrono::seconds default_release_timeout{5};

}  // namespace dlock
