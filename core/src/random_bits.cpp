#include <dlock/core/backend/random_bits.hpp>

#include <pthread.h>

#include <atomic>
#include <random>

namespace dlock {

namespace {

std::uint64_t fresh_seed() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

// Raised in every child a fork makes (the thread that forked is the child's only one): a
// count rather than getpid(), which would be a system call per value.
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

std::uint64_t random_bits() {
  thread_local std::mt19937_64 generator{fresh_seed()};
  thread_local unsigned seeded_after = forks_so_far();
  if (const unsigned now = forks_so_far(); now != seeded_after) {
    generator.seed(fresh_seed());
    seeded_after = now;
  }
  return generator();
}

}  // namespace dlock
