#include "token.hpp"

#include <cstdint>

#include <dlock/core/backend/random_bits.hpp>

namespace dlock::redis::detail {

std::string random_token() {
  static constexpr char digits[] = "0123456789abcdef";
  std::string token;
  for (int word = 0; word < 2; ++word) {
    std::uint64_t bits = dlock::random_bits();
    for (int i = 0; i < 16; ++i, bits >>= 4) token.push_back(digits[bits & 15]);
  }
  return token;
}

}  // namespace dlock::redis::detail
