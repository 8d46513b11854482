// The generator behind Redis's lock tokens and ZooKeeper's node-name prefixes.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <set>

#include <dlock/core/backend/random_bits.hpp>

TEST_CASE("a forked child draws other random bits than its parent's next ones", "[unit]") {
  (void)dlock::random_bits();  // this thread's generator exists before the fork
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const std::array<std::uint64_t, 2> drawn{dlock::random_bits(), dlock::random_bits()};
    const bool sent = ::write(to_parent[1], drawn.data(), sizeof drawn) == sizeof drawn;
    _exit(sent ? 0 : 1);
  }
  REQUIRE(child > 0);
  // Without a fresh seed in the child, these are the very values the child drew.
  const std::array<std::uint64_t, 2> parents{dlock::random_bits(), dlock::random_bits()};
  std::array<std::uint64_t, 2> childs{};
  const auto got = ::read(to_parent[0], childs.data(), sizeof childs);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::close(to_parent[0]);
  ::close(to_parent[1]);
  REQUIRE(got == static_cast<ssize_t>(sizeof childs));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(childs != parents);
}

TEST_CASE("random bits do not repeat within a thread", "[unit]") {
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 10000; ++i) seen.insert(dlock::random_bits());
  CHECK(seen.size() == 10000);
}
