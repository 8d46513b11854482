// dlock/core/backend/stop_grace.hpp: how long a stopped acquire may wait for its server before
// the caller hears (for backend implementers).
//
// The contract answers a stop request well under 100 ms (DESIGN.md, "Acquire semantics"), and
// leaves nothing behind on the server. A live server confirms the withdrawal of a wait within
// milliseconds; a silent or partitioned one never does. So a backend waits this long at most
// for the confirmation, then answers the caller and lets the cleanup finish behind it (the
// server drops what is left once the session, lease or connection goes). One value for every
// backend: it leaves more than half of the 100 ms to a loaded machine's scheduling, which under
// the sanitizers and a busy CI runner takes tens of milliseconds.
#pragma once

#include <chrono>

namespace dlock {

inline constexpr std::chrono::milliseconds stop_grace{40};

}  // namespace dlock
