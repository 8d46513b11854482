// Upgradeable reads of a reader-writer lock (docs/semantics.md, "Upgradeable reads"), with the
// cases of .NET DistributedLock's upgradeable-lock tests as a guide: one upgradeable read at a
// time beside plain readers, an upgrade that waits for the readers and lets no writer in
// between, a token that rises, misuse that is an error, and a lost signal that survives.
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using boost::asio::use_future;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

// The upgrade of `held` is waiting at the backend: `provider` counted a wait for it.
bool upgrade_waits(dlock::provider& provider, std::uint64_t waits_before) {
  return wait_until([&] { return provider.metrics().waits > waits_before; });
}

// A name and two clients of it, as two processes would be.
struct two_clients {
  explicit two_clients(const std::string& base) : name(unique_name(base)) {}

  std::string name;
  std::shared_ptr<dlock::provider> a = backend().make_provider();
  std::shared_ptr<dlock::provider> b = backend().make_provider();
};

// An upgradeable read beside a plain reader of another provider, so an upgrade has to wait.
struct upgradeable_beside_reader {
  explicit upgradeable_beside_reader(const std::string& base) : name(unique_name(base)) {}

  std::string name;
  std::shared_ptr<dlock::provider> readers = backend().make_provider();
  std::shared_ptr<dlock::provider> upgrader = backend().make_provider();
  dlock::lock_handle reader = readers->create_reader_writer_lock(name).acquire_read(10s);
  dlock::upgradeable_lock_handle upgradeable =
      upgrader->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
};

}  // namespace

TEST_CASE("an upgradeable read shares the lock with plain readers", "[contract][upgradeable]") {
  two_clients clients("upgradeable-readers");
  auto& [name, a, b] = clients;
  auto reader = b->create_reader_writer_lock(name).acquire_read(10s);
  auto upgradeable = a->create_reader_writer_lock(name).try_acquire_upgradeable_read();
  REQUIRE(upgradeable);
  CHECK(upgradeable->held());
  CHECK_FALSE(upgradeable->upgraded());
  CHECK(upgradeable->name() == name);
  CHECK(b->create_reader_writer_lock(name).try_acquire_read());
  CHECK(upgradeable->fencing_token() != reader.fencing_token());
}

TEST_CASE("an upgradeable read excludes writers and other upgradeable reads, and a writer "
          "excludes it",
          "[contract][upgradeable]") {
  two_clients clients("upgradeable-excludes");
  auto& [name, a, b] = clients;
  auto others = b->create_reader_writer_lock(name);
  auto upgradeable = a->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
  CHECK_FALSE(others.try_acquire_upgradeable_read());
  CHECK_FALSE(others.try_acquire_upgradeable_read(10ms));
  CHECK_FALSE(others.try_acquire_write());
  REQUIRE_THROWS_AS(others.acquire_write(10ms), dlock::timeout_error);
  REQUIRE_THROWS_AS(others.acquire_upgradeable_read(10ms), dlock::timeout_error);
  upgradeable.release();

  auto writer = others.acquire_write(10s);
  CHECK_FALSE(a->create_reader_writer_lock(name).try_acquire_upgradeable_read());
  CHECK_FALSE(a->create_reader_writer_lock(name).try_acquire_read());
  writer.release();
  CHECK(a->create_reader_writer_lock(name).try_acquire_upgradeable_read());
}

TEST_CASE("a waiting upgradeable read is granted when the writer leaves, and a waiting writer "
          "when the upgradeable read leaves",
          "[contract][upgradeable]") {
  two_clients clients("upgradeable-handoff");
  auto& [name, a, b] = clients;
  auto writer = a->create_reader_writer_lock(name).acquire_write(10s);
  auto upgradeable =
      b->create_reader_writer_lock(name).async_acquire_upgradeable_read(1h, {}, use_future);
  REQUIRE(upgradeable.wait_for(0s) == std::future_status::timeout);
  writer.release();
  REQUIRE(upgradeable.wait_for(10s) == std::future_status::ready);
  auto held = upgradeable.get();
  CHECK(held.held());

  auto next_writer = a->create_reader_writer_lock(name).async_acquire_write(1h, {}, use_future);
  REQUIRE(next_writer.wait_for(0s) == std::future_status::timeout);
  held.release();
  REQUIRE(next_writer.wait_for(10s) == std::future_status::ready);
  CHECK(next_writer.get().held());
}

TEST_CASE("upgrade turns the upgradeable read into the write lock, with a greater token",
          "[contract][deployment][upgradeable]") {
  two_clients clients("upgrade");
  auto& [name, a, b] = clients;
  auto upgradeable = a->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
  const auto read_token = upgradeable.fencing_token();
  upgradeable.upgrade(10s);
  CHECK(upgradeable.upgraded());
  CHECK(upgradeable.held());
  CHECK(upgradeable.fencing_token() > read_token);
  auto others = b->create_reader_writer_lock(name);
  CHECK_FALSE(others.try_acquire_read());
  CHECK_FALSE(others.try_acquire_write());
  CHECK_FALSE(others.try_acquire_upgradeable_read());
  const auto write_token = upgradeable.fencing_token();
  upgradeable.release();
  CHECK_FALSE(upgradeable);
  auto next = others.acquire_write(10s);
  CHECK(next.fencing_token() > write_token);
}

TEST_CASE("upgrade waits for the plain readers to leave", "[contract][upgradeable]") {
  upgradeable_beside_reader held("upgrade-waits");
  auto& [name, readers, upgrader, reader, upgradeable] = held;
  const auto waits = upgrader->metrics().waits;
  auto upgraded = upgradeable.async_try_upgrade(1h, {}, use_future);
  REQUIRE(upgrade_waits(*upgrader, waits));
  CHECK(upgraded.wait_for(0s) == std::future_status::timeout);
  // Writers first: the upgrade's write request may still be on its way, so a reader let in
  // before it is queued is no starvation; one let in after it is.
  CHECK(wait_until([&] {
    return !readers->create_reader_writer_lock(name).try_acquire_read().has_value();
  }));
  reader.release();
  REQUIRE(upgraded.wait_for(10s) == std::future_status::ready);
  CHECK(upgraded.get());
  CHECK(upgradeable.upgraded());
  CHECK_FALSE(readers->create_reader_writer_lock(name).try_acquire_read());
}

TEST_CASE("a second upgrade is an error, and so is an upgrade after release",
          "[contract][upgradeable]") {
  const auto name = unique_name("upgrade-misuse");
  auto provider = backend().make_provider();
  auto upgradeable = provider->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
  upgradeable.upgrade(10s);
  CHECK_THROWS_AS(upgradeable.upgrade(10s), std::logic_error);
  CHECK_THROWS_AS((void)upgradeable.try_upgrade(), std::logic_error);
  CHECK_THROWS_AS(upgradeable.async_upgrade(1s, {}, use_future), std::logic_error);
  CHECK(upgradeable.upgraded());
  CHECK(upgradeable.held());

  upgradeable.release();
  CHECK_THROWS_AS(upgradeable.upgrade(10s), std::logic_error);
  CHECK_THROWS_AS(upgradeable.async_try_upgrade(1s, {}, use_future), std::logic_error);
  dlock::upgradeable_lock_handle empty;
  CHECK_THROWS_AS((void)empty.try_upgrade(), std::logic_error);
  CHECK(empty.lost());
  CHECK_FALSE(empty.upgraded());
  CHECK(empty.fencing_token() == 0);
  CHECK_THROWS_AS(upgradeable.throw_if_lost(), dlock::lock_lost_error);

  auto again = provider->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
  CHECK_THROWS_AS(again.upgrade(-1s), std::invalid_argument);
  CHECK_FALSE(again.upgraded());
  CHECK(again.held());
}

TEST_CASE("upgrading a lost upgradeable read throws lock_lost_error", "[contract][upgradeable][lost]") {
  const auto name = unique_name("upgrade-lost");
  auto provider = backend().make_provider();
  auto upgradeable = provider->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
  CHECK_NOTHROW(upgradeable.throw_if_lost());
  backend().break_lock(name);
  REQUIRE(wait_until([&] { return upgradeable.lost(); }, 30s));
  CHECK_THROWS_AS(upgradeable.upgrade(10s), dlock::lock_lost_error);
  CHECK_THROWS_AS((void)upgradeable.try_upgrade(), dlock::lock_lost_error);
  auto async_upgrade = upgradeable.async_upgrade(10s, {}, use_future);
  REQUIRE(async_upgrade.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(async_upgrade.get(), dlock::lock_lost_error);
  CHECK_THROWS_AS(upgradeable.throw_if_lost(), dlock::lock_lost_error);
  CHECK_FALSE(upgradeable.upgraded());
  upgradeable.release();
  CHECK(backend().make_provider()->create_reader_writer_lock(name).try_acquire_write(10s));
}

TEST_CASE("the lost signal survives an upgrade", "[contract][upgradeable][lost]") {
  const auto name = unique_name("upgrade-lost-signal");
  auto provider = backend().make_provider();
  auto upgradeable = provider->create_reader_writer_lock(name).acquire_upgradeable_read(10s);
  const std::stop_token lost_before_upgrade = upgradeable.lost_token();
  std::atomic<bool> callback_ran{false};
  upgradeable.on_lost([&] { callback_ran = true; });
  upgradeable.upgrade(10s);
  CHECK_FALSE(lost_before_upgrade.stop_requested());
  backend().break_lock(name);
  REQUIRE(wait_until([&] { return lost_before_upgrade.stop_requested(); }, 30s));
  CHECK(upgradeable.lost());
  CHECK_FALSE(upgradeable.held());
  CHECK(wait_until([&] { return callback_ran.load(); }));
  CHECK_THROWS_AS(upgradeable.throw_if_lost(), dlock::lock_lost_error);
}

TEST_CASE("an upgrade that times out leaves an upgradeable read that still excludes writers",
          "[contract][upgradeable]") {
  upgradeable_beside_reader held("upgrade-timeout");
  auto& [name, readers, upgrader, reader, upgradeable] = held;
  const auto token = upgradeable.fencing_token();
  const auto lost_token = upgradeable.lost_token();

  CHECK_FALSE(upgradeable.try_upgrade());
  CHECK_FALSE(upgradeable.try_upgrade(50ms));
  REQUIRE_THROWS_AS(upgradeable.upgrade(50ms), dlock::timeout_error);
  CHECK_FALSE(upgradeable.upgraded());
  CHECK(upgradeable.held());
  CHECK_FALSE(lost_token.stop_requested());
  CHECK(upgradeable.fencing_token() > token);  // the read was taken again
  auto others = readers->create_reader_writer_lock(name);
  CHECK_FALSE(others.try_acquire_write());
  CHECK_FALSE(others.try_acquire_upgradeable_read());
  CHECK(others.try_acquire_read());

  reader.release();
  CHECK(upgradeable.try_upgrade(10s));
  CHECK(upgradeable.upgraded());
}

TEST_CASE("a stop request ends a waiting upgrade promptly and leaves the upgradeable read",
          "[contract][upgradeable][cancel]") {
  upgradeable_beside_reader held("upgrade-stop");
  auto& [name, readers, upgrader, reader, upgradeable] = held;

  std::stop_source stop;
  const auto waits = upgrader->metrics().waits;
  auto try_upgrade = upgradeable.async_try_upgrade(1h, stop.get_token(), use_future);
  REQUIRE(upgrade_waits(*upgrader, waits));
  stop.request_stop();
  REQUIRE(try_upgrade.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(try_upgrade.get());
  CHECK(upgradeable.held());
  CHECK_FALSE(upgradeable.upgraded());

  std::stop_source stop_again;
  auto upgrade = upgradeable.async_upgrade(1h, stop_again.get_token(), use_future);
  REQUIRE(upgrade_waits(*upgrader, waits + 1));
  stop_again.request_stop();
  REQUIRE(upgrade.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(upgrade.get(), dlock::cancelled_error);
  CHECK(upgradeable.held());

  std::stop_source stopped;
  stopped.request_stop();
  CHECK_THROWS_AS(upgradeable.upgrade(1h, stopped.get_token()), dlock::cancelled_error);
  CHECK(upgradeable.held());
  CHECK_FALSE(readers->create_reader_writer_lock(name).try_acquire_write());
  CHECK(readers->create_reader_writer_lock(name).try_acquire_read());
}

TEST_CASE("an upgradeable read leaves nothing on the server once released, upgraded or not",
          "[contract][upgradeable][cancel]") {
  const auto name = unique_name("upgradeable-footprint");
  const auto empty = backend().server_footprint(name);
  if (!empty) DLOCK_SKIP(backend().label() << "'s state cannot be seen from outside");
  auto provider = backend().make_provider();
  auto rw = provider->create_reader_writer_lock(name);
  {
    auto upgradeable = rw.acquire_upgradeable_read(10s);
    CHECK(backend().server_footprint(name) != empty);
    upgradeable.upgrade(10s);
  }
  CHECK(wait_until([&] { return backend().server_footprint(name) == empty; }));

  auto reader = backend().make_provider()->create_reader_writer_lock(name).acquire_read(10s);
  REQUIRE(wait_until([&] { return backend().server_footprint(name) != empty; }));
  const auto with_reader = backend().server_footprint(name);
  {
    auto upgradeable = rw.acquire_upgradeable_read(10s);
    CHECK_FALSE(upgradeable.try_upgrade(50ms));
  }
  CHECK(wait_until([&] { return backend().server_footprint(name) == with_reader; }));
}

TEST_CASE("async upgradeable reads and upgrades complete through any completion token",
          "[contract][upgradeable][async]") {
  const auto name = unique_name("upgradeable-async");
  auto provider = backend().make_provider();
  auto rw = provider->create_reader_writer_lock(name);
  auto first = rw.async_try_acquire_upgradeable_read(0s, {}, use_future).get();
  REQUIRE(first);
  CHECK_FALSE(backend().make_provider()->create_reader_writer_lock(name)
                  .async_try_acquire_upgradeable_read(0s, {}, use_future)
                  .get());
  CHECK(first->async_try_upgrade(10s, {}, use_future).get());
  CHECK(first->upgraded());
  first->release();
  // One attempt, made after the read is gone from the server.
  auto once = rw.acquire_upgradeable_read(10s);
  CHECK(once.async_try_upgrade(0s, {}, use_future).get());
  once.release();

  boost::asio::io_context io;
  bool upgraded = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto held = co_await rw.async_acquire_upgradeable_read(10s, {}, boost::asio::use_awaitable);
        co_await held.async_upgrade(10s, {}, boost::asio::use_awaitable);
        upgraded = held.upgraded();
      },
      [](std::exception_ptr error) {
        if (error) std::rethrow_exception(error);
      });
  io.run();
  CHECK(upgraded);

  auto writer = rw.acquire_write(10s);
  CHECK_THROWS_AS(backend().make_provider()->create_reader_writer_lock(name)
                      .async_acquire_upgradeable_read(10ms, {}, use_future)
                      .get(),
                  dlock::timeout_error);
  CHECK_THROWS_AS(rw.async_acquire_upgradeable_read(-1s, {}, use_future), std::invalid_argument);
}

TEST_CASE("upgraders, writers and readers together: writes never overlap anything",
          "[contract][upgradeable]") {
  const auto name = unique_name("upgradeable-together");
  constexpr int rounds = 5;
  std::atomic<int> writing{0};
  std::atomic<int> reading{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> upgrades{0};
  std::atomic<int> failures{0};
  auto write_section = [&] {
    if (writing.fetch_add(1) != 0 || reading.load() != 0) ++overlaps;
    std::this_thread::yield();
    writing.fetch_sub(1);
  };
  std::vector<std::thread> workers;
  for (int worker = 0; worker < 3; ++worker) {
    workers.emplace_back([&, worker] {
      try {
        auto provider = backend().make_provider();
        auto rw = provider->create_reader_writer_lock(name);
        for (int round = 0; round < rounds; ++round) {
          if (worker == 0) {
            auto reader = rw.acquire_read(30s);
            reading.fetch_add(1);
            if (writing.load() != 0) ++overlaps;
            reading.fetch_sub(1);
          } else if (worker == 1) {
            auto writer = rw.acquire_write(30s);
            write_section();
          } else {
            auto upgradeable = rw.acquire_upgradeable_read(30s);
            const auto token = upgradeable.fencing_token();
            upgradeable.upgrade(30s);
            if (upgradeable.fencing_token() <= token) ++failures;
            write_section();
            ++upgrades;
          }
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& worker : workers) worker.join();
  CHECK(failures == 0);
  CHECK(overlaps == 0);
  CHECK(upgrades == rounds);
}
