// What the minimum-hold cases share (min_hold_test.cpp, multiprocess_test.cpp).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include <dlock/core.hpp>

#include "backend.hpp"

namespace contract {

/// Long enough that a release and a refused try fit in it on a loaded machine, short enough
/// for CI (the "a second or two").
inline constexpr std::chrono::milliseconds min_hold{2000};

/// How much earlier than grant + min_hold, by this process's clock, a hold may end: the server's
/// clock and this one tick apart (a local backend reads the same clock).
inline constexpr std::chrono::milliseconds clock_slack{20};

/// Whether `provider`'s backend keeps minimum holds (it refuses them up front otherwise).
/// Throws std::logic_error, failing the case, when that is not what the backend's fixture says
/// (a ZooKeeper server without TTL nodes refuses what the backend keeps elsewhere).
inline bool keeps_min_hold(dlock::provider& provider) {
  std::string refusal;
  try {
    (void)provider.create_lock("min-hold-probe").with_min_hold(min_hold);
  } catch (const std::invalid_argument& refused) {
    refusal = refused.what();
  }
  const bool kept = refusal.empty();
  if (kept != backend().keeps_min_hold()) {
    throw std::logic_error(backend().label() + "'s contract fixture says it " +
                           (kept ? "refuses" : "keeps") + " minimum holds, but " +
                           (kept ? "it keeps them" : "it refused one: " + refusal));
  }
  return kept;
}

/// `url` with `option` ("name=value") added to its query.
inline std::string with_url_option(const std::string& url, const std::string& option) {
  return url + (url.find('?') == std::string::npos ? '?' : '&') + option;
}

}  // namespace contract
