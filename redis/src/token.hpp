// Private to dlock::redis: the random value that says a grant is ours.
#pragma once

#include <string>

namespace dlock::redis::detail {

/// A random 128-bit token as 32 hex digits.
std::string random_token();

}  // namespace dlock::redis::detail
