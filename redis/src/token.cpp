#include "token.hpp"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <random>

namespace dlock::redis::detail {

namespace {

std::uint64_t fresh_seed() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

// Raised in every child a fork makes (the thread that forked, the child's only one): a count
// rather than getpid(), which would be a system call per token.
std::atomic<unsigned> forks{0};

unsigned forks_so_far() {
  static const bool counting = [] {
    ::pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)counting;
  return forks.load(std::memory_order_relaxed);
}

}  // namespace

std::string random_token() {
  thread_local std::mt19937_64 generator{fresh_seed()};
  // A child forked after this thread made tokens inherits the generator's state, and would
  // make the parent's next tokens: a grant of the parent's would pass for the child's.
  thread_local unsigned seeded_after = forks_so_far();
  if (const unsigned now = forks_so_far(); now != seeded_after) {
    generator.seed(fresh_seed());
    seeded_after = now;
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
