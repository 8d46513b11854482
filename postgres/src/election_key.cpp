#include "election_key.hpp"

namespace dlock::postgres::detail {

advisory_key election_key(const std::string& name) {
  return advisory_key::from_name("dlock-election:" + name);
}

}  // namespace dlock::postgres::detail
