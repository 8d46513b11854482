// Asking the lock service whether a fencing token still holds a lock (Chubby's sequencer
// check): what a resource server that does not store tokens relies on. Current while its grant
// holds the lock, and never after: not after the release, not after a loss, not during a later
// grant; a token nobody was granted is not current.
#include <catch2/catch.hpp>

#include <string>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("a token is current while its grant holds the lock, and not after its release or "
          "during a later grant",
          "[contract][deployment][is_current]") {
  auto holder = backend().make_provider();
  auto resource_server = backend().make_provider();
  const auto name = unique_name("current");
  const auto checked = resource_server->create_lock(name);

  auto held = holder->create_lock(name).acquire(10s);
  const auto token = held.fencing_token();
  CHECK(checked.is_current(token));
  CHECK_FALSE(checked.is_current(token + 1000));  // nobody holds with it
  held.release();
  CHECK_FALSE(checked.is_current(token));

  auto later = holder->create_lock(name).acquire(10s);
  CHECK(checked.is_current(later.fencing_token()));
  CHECK_FALSE(checked.is_current(token));
}

TEST_CASE("a token is not current once its lock was broken behind its holder's back",
          "[contract][is_current]") {
  auto holder = backend().make_provider();
  auto resource_server = backend().make_provider();
  const auto name = unique_name("current-broken");
  auto held = holder->create_lock(name).acquire(10s);
  const auto token = held.fencing_token();
  REQUIRE(resource_server->create_lock(name).is_current(token));
  backend().break_lock(name);
  // The server may take a moment to let go (a session being terminated, a key being deleted
  // on the last RedLock node of a majority).
  CHECK(wait_until([&] { return !resource_server->create_lock(name).is_current(token); }));
}

TEST_CASE("a writer's token is current while it holds the write lock; a reader's never is",
          "[contract][is_current][rw]") {
  auto holder = backend().make_provider();
  auto resource_server = backend().make_provider();
  const auto name = unique_name("current-rw");
  const auto checked = resource_server->create_reader_writer_lock(name);
  auto rw = holder->create_reader_writer_lock(name);

  auto write = rw.acquire_write(10s);
  const auto token = write.fencing_token();
  CHECK(checked.is_current_write(token));
  write.release();
  CHECK_FALSE(checked.is_current_write(token));

  auto read = rw.acquire_read(10s);
  CHECK_FALSE(checked.is_current_write(read.fencing_token()));
}
