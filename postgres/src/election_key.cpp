#include "election_key.hpp"

namespace dlock::postgres::detail {

advisory_key election_key(const std::string& name) {
  return advisory_key::from_name("dlock-election:" + name);
}

std::string leader_channel(const std::string& name) {
  return "dlock_leader_" + election_key(name).name();
}

}  // namespace dlock::postgres::detail
