// Private to dlock::redis: the checks a provider's options pass before a backend is made, and
// the defaults that depend on other options.
#pragma once

#include <dlock/redis/options.hpp>

namespace dlock::redis::detail {

/// `opts` with its zero durations replaced by their defaults (extend_every = expiry / 3,
/// command_timeout = expiry / 3 but at most 5 s).
/// Throws std::invalid_argument naming the first field that is invalid.
options validated(options opts);

}  // namespace dlock::redis::detail
