// The caller-driven sessions (postgres/src/caller_sessions.hpp): an uncontended acquire and its
// release run on the caller's thread, and the grants taken that way are freed when released
// from anywhere. That they are marked lost as soon as their session ends is in
// postgres_fault_test.cpp (pg_terminate_backend of the holder's session).
#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

// keepalive 30 s: the probe comes every 15 s, so whatever a test sees sooner is not its doing.
std::shared_ptr<dlock::provider> provider_named(const std::string& application) {
  return dlock::make_provider(server_url() + "?application_name=" + application +
                              "&keepalive=30s");
}

// Holds the provider's io thread until the returned promise is set.
std::promise<void> hold_provider_thread(dlock::provider& provider) {
  std::promise<void> unblock;
  auto unblocked = unblock.get_future().share();
  std::atomic<bool> blocking{false};
  boost::asio::post(provider.get_executor(), [&blocking, unblocked] {
    blocking = true;
    unblocked.wait();
  });
  REQUIRE(wait_until([&] { return blocking.load(); }));
  return unblock;
}

}  // namespace

TEST_CASE("an uncontended acquire and its release do not wait for the provider's thread",
          "[postgres][caller]") {
  const auto application = unique_name("caller-thread");
  auto pg = provider_named(application);
  const auto name = unique_name("caller-thread");
  pg->create_lock(name).acquire().release();  // the caller's session is up
  auto unblock = hold_provider_thread(*pg);
  auto cycle = std::async(std::launch::async, [&] {
    auto held = pg->create_lock(name).acquire(1s);
    const auto token = held.fencing_token();
    held.release();
    return token;
  });
  const bool done = cycle.wait_for(5s) == std::future_status::ready;
  unblock.set_value();
  REQUIRE(done);
  CHECK(cycle.get() > 0);
  CHECK(provider_named(unique_name("caller-other"))->create_lock(name).try_acquire());
}

TEST_CASE("a grant taken on the caller's thread and released on the provider's thread is freed",
          "[postgres][caller]") {
  auto pg = provider_named(unique_name("caller-background"));
  const auto name = unique_name("caller-background");
  auto held = pg->create_lock(name).acquire();
  std::atomic<bool> released{false};
  boost::asio::post(pg->get_executor(), [&] {
    held.release();  // on the provider's own thread: in the background
    released = true;
  });
  REQUIRE(wait_until([&] { return released.load(); }));
  auto other = provider_named(unique_name("caller-background-other"));
  CHECK(wait_until([&] { return other->create_lock(name).try_acquire().has_value(); }, 5s));
}
