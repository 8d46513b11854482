#include "token.hpp"

#include <unistd.h>

#include <cstdint>
#include <random>

namespace dlock::redis::detail {

namespace {

std::uint64_t fresh_seed() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

}  // namespace

std::string random_token() {
  thread_local std::mt19937_64 generator{fresh_seed()};
  // A child forked after this thread made tokens inherits the generator's state, and would
  // make the parent's next tokens: a grant of the parent's would pass for the child's.
  thread_local pid_t seeded_in = ::getpid();
  if (const pid_t now = ::getpid(); now != seeded_in) {
    generator.seed(fresh_seed());
    seeded_in = now;
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string token;
  for (int word = 0; word < 2; ++word) {
    std::uint64_t bits = generator();
    for (int i = 0; i < 16; ++i, bits >>= 4) token.push_back(digits[bits & 15]);
  }
  return token;
}

}  // namespace dlock::redis::detail
