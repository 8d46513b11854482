#include "session.hpp"

#include <algorithm>

namespace dlock::postgres::detail {

bool pg_session::holds(const std::string& resource) const {
  return std::any_of(grants.begin(), grants.end(),
                     [&](const auto& entry) { return entry.second.resource == resource; });
}

bool pg_session::holds_or_attempts(const std::string& resource) const {
  return attempting.contains(resource) || holds(resource);
}

}  // namespace dlock::postgres::detail
