#include "semaphore_keys.hpp"

namespace dlock::postgres::detail {

advisory_key semaphore_base(const std::string& name) {
  return advisory_key::from_name("dlock-semaphore:" + name);
}

std::string channel_of(const std::string& name) { return "dlock_" + semaphore_base(name).name(); }

// The marker's low 8 bits are 0x01: an ASCII-packed name always ends in 7 one bits (fewer
// than 9 characters) or a 0 bit (9), so no name maps here.
advisory_key max_count_marker(const std::string& name, std::uint32_t max_count) {
  return advisory_key(semaphore_base(name).high(), static_cast<std::int32_t>((max_count << 8) | 1));
}

}  // namespace dlock::postgres::detail
