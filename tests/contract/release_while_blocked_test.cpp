// release() never hangs on a busy provider (docs/semantics.md, "Handles"): it waits at most
// release_timeout for the backend, also when the provider's thread that completes acquires is
// blocked (a completion handler that waits on something), and the lock is freed once that
// thread runs again. Backends differ in how, and both ways pass: a release that does not need
// that thread (files, memory, Redis on one server, ZooKeeper's client thread) is done at once;
// one that goes through it (RedLock, etcd, pooled SQL sessions) throws connection_error naming
// release_timeout and the lock, and the unlock goes out when the thread is free.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <optional>
#include <string>

#include "backend.hpp"
#include "blocked_provider.hpp"
#include "support.hpp"
#include "timing.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("a release while the provider's thread is blocked returns within release_timeout, "
          "and the lock is free once the thread runs",
          "[contract][release]") {
  constexpr auto release_timeout = 1s;
  auto provider = backend().make_provider_with_release_timeout(release_timeout);
  const std::string name = unique_name("release-blocked");
  dlock::lock_handle held = support::hold_lock(*provider, name);
  std::optional<std::string> failure;
  std::chrono::steady_clock::duration took{};
  {
    support::blocked_provider_thread blocked(*provider);
    const auto start = std::chrono::steady_clock::now();
    try {
      held.release();
    } catch (const dlock::connection_error& e) {
      failure = e.what();
    }
    took = std::chrono::steady_clock::now() - start;
    CHECK_FALSE(held);
    CHECK(blocked.let_go());
  }
  CHECK(took < release_timeout + support::latency_bound(100ms));
  if (failure) {
    CHECK_THAT(*failure, Catch::Contains("release_timeout"));
    CHECK_THAT(*failure, Catch::Contains(name));
  }
  std::cout << backend().label() << ": release with the provider's thread blocked "
            << (failure ? "failed" : "succeeded") << " after "
            << std::chrono::duration<double, std::milli>(took).count() << " ms\n";

  // A lock left behind would be held as long as the provider lives (a SQL session, a
  // ZooKeeper session), past this wait; a lease would end within it either way.
  auto other = backend().make_provider();
  auto again = other->create_lock(name).try_acquire(10s);
  REQUIRE(again);
  again->release();
  if (backend().server_footprint(name)) {
    CHECK(wait_until([&] { return backend().server_footprint(name)->empty(); }, 10s));
  }
}
