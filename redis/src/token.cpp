#include "token.hpp"

#include <cstdint>
#include <random>

namespace dlock::redis::detail {

std::string random_token() {
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device();
  }()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string token;
  for (int word = 0; word < 2; ++word) {
    std::uint64_t bits = generator();
    for (int i = 0; i < 16; ++i, bits >>= 4) token.push_back(digits[bits & 15]);
  }
  return token;
}

}  // namespace dlock::redis::detail
