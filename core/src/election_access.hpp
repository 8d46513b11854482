// Private to core: how core's election code makes leaderships and observations.
#pragma once

#include <memory>
#include <string>

#include <dlock/core/election.hpp>

namespace dlock::detail {

struct election_access {
  static leadership make(election_target target, lock_handle lock) {
    return leadership(std::move(target), std::move(lock));
  }
  static leader_observation make(std::shared_ptr<leader_observation::state> state) noexcept {
    return leader_observation(std::move(state));
  }
};

/// "host:pid", the value of a candidate that names none.
std::string default_candidate_value();

}  // namespace dlock::detail
