#include "upgrade_gate_key.hpp"

namespace dlock::postgres::detail {

advisory_key upgrade_gate_key(const std::string& name) {
  return advisory_key::from_name("dlock-upgrade-gate:" + name);
}

}  // namespace dlock::postgres::detail
