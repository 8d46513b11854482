// Handle semantics (docs/semantics.md "Handles"), stated once for every backend.
#include <atomic>
#include <future>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("release empties the handle and is idempotent", "[contract][handle]") {
  const auto name = unique_name("release");
  auto provider = backend().make_provider();
  auto handle = provider->create_lock(name).acquire();
  handle.release();
  CHECK_FALSE(handle);
  CHECK(handle.lost());
  handle.release();
  CHECK(backend().make_provider()->create_lock(name).try_acquire());
}

TEST_CASE("destroying a handle releases the lock", "[contract][deployment][handle]") {
  const auto name = unique_name("raii");
  auto provider = backend().make_provider();
  { auto handle = provider->create_lock(name).acquire(); }
  CHECK(backend().make_provider()->create_lock(name).try_acquire());
}

TEST_CASE("moving a handle moves the lock, and move assignment releases the target's lock",
          "[contract][handle]") {
  const auto first = unique_name("move-a");
  const auto second = unique_name("move-b");
  auto provider = backend().make_provider();
  auto other = backend().make_provider();
  dlock::lock_handle a = provider->create_lock(first).acquire();
  dlock::lock_handle moved = std::move(a);
  CHECK_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is specified as empty
  CHECK(moved);
  CHECK_FALSE(other->create_lock(first).try_acquire());

  dlock::lock_handle b = provider->create_lock(second).acquire();
  moved = std::move(b);
  CHECK(other->create_lock(first).try_acquire());
  CHECK_FALSE(other->create_lock(second).try_acquire());
}

TEST_CASE("a handle is marked lost when the backend loses the lock",
          "[contract][deployment][lost]") {
  const auto name = unique_name("lost");
  auto provider = backend().make_provider();
  auto handle = provider->create_lock(name).acquire();
  std::atomic<bool> callback_ran{false};
  handle.on_lost([&] { callback_ran = true; });
  CHECK_FALSE(handle.lost());

  backend().break_lock(name);

  REQUIRE(wait_until([&] { return handle.lost(); }, 30s));
  CHECK(handle.lost_token().stop_requested());
  REQUIRE(wait_until([&] { return callback_ran.load(); }));
  CHECK(handle);  // lost, but still to be released
  handle.release();
  CHECK(backend().make_provider()->create_lock(name).try_acquire());
}

TEST_CASE("a held lock is never reported lost while it is held", "[contract][deployment][lost]") {
  const auto name = unique_name("not-lost");
  auto provider = backend().make_provider();
  auto handle = provider->create_lock(name).acquire();
  // Contenders come and go; none of that may look like a loss to the holder.
  for (int i = 0; i < 20; ++i) {
    auto other = backend().make_provider();
    CHECK_FALSE(other->create_lock(name).try_acquire(1ms));
  }
  CHECK_FALSE(handle.lost());
}

TEST_CASE("a handle and its lock object outlive their provider", "[contract][deployment][handle]") {
  const auto name = unique_name("outlive");
  auto provider = backend().make_provider();
  auto lock = provider->create_lock(name);
  auto handle = lock.acquire();
  provider.reset();
  CHECK_FALSE(handle.lost());
  CHECK_FALSE(backend().make_provider()->create_lock(name).try_acquire());
  handle.release();
  CHECK(lock.try_acquire());
}

TEST_CASE("providers convert to the narrow interfaces a service asks for",
          "[contract][provider]") {
  std::shared_ptr<dlock::provider> provider = backend().make_provider();
  std::shared_ptr<dlock::lock_provider> locks = provider;
  std::shared_ptr<dlock::reader_writer_lock_provider> rw = provider;
  std::shared_ptr<dlock::semaphore_provider> semaphores = provider;
  CHECK(locks->create_lock(unique_name("iface")).try_acquire());
  CHECK(rw->create_reader_writer_lock(unique_name("iface")).try_acquire_read());
  CHECK(semaphores->create_semaphore(unique_name("iface"), 2).try_acquire());
  CHECK(provider->scheme() == backend().label());
}

TEST_CASE("an on_lost callback already on its way is dropped when the handle is released",
          "[contract][lost]") {
  auto provider = backend().make_provider();
  const auto name = support::unique_name("dropped-callback");
  auto held = provider->create_lock(name).acquire(10s);
  backend().break_lock(name);
  REQUIRE(support::wait_until([&] { return held.lost(); }, 30s));
  // Hold the provider's thread; the callback of an already lost handle is posted at once,
  // so it queues behind this.
  std::promise<void> unblock;
  auto unblocked = unblock.get_future().share();
  std::atomic<bool> blocking{false};
  boost::asio::post(provider->get_executor(), [&, unblocked] {
    blocking = true;
    unblocked.wait();
  });
  REQUIRE(support::wait_until([&] { return blocking.load(); }));
  std::atomic<bool> ran{false};
  held.on_lost([&] { ran = true; });
  held.release();
  unblock.set_value();
  // Whatever the thread had queued has run once a later post runs.
  std::atomic<bool> drained{false};
  boost::asio::post(provider->get_executor(), [&] { drained = true; });
  REQUIRE(support::wait_until([&] { return drained.load(); }));
  CHECK_FALSE(ran);
}
