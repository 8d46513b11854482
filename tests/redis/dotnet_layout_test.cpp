// dlock::redis in .NET DistributedLock's key layout (layout=dotnet), seen with redis-cli: the
// keys each primitive writes, the waiting writer's mark, what the layout refuses and why. The
// real .NET library is met in tests/dotnet/redis_interop_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <stdexcept>
#include <stop_token>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

namespace redis_test {

using namespace std::chrono_literals;

namespace {

std::shared_ptr<dlock::provider> dotnet_layout() {
  return dlock::make_provider(endpoint() + "?layout=dotnet&prefix=" + prefix());
}

}  // namespace

TEST_CASE("layout=dotnet options that cannot work are refused by name", "[redis][dotnet_layout]") {
  CHECK_THROWS_WITH(dlock::make_provider(endpoint() + "?layout=net"),
                    Catch::Contains("layout") && Catch::Contains("'net'"));
  CHECK_THROWS_AS(dlock::make_provider(endpoint() + "?layout=dotnet&plain_keys=true"),
                  std::invalid_argument);
  CHECK_THROWS_WITH(dlock::make_provider(endpoint() + "?layout=dotnet&plain_keys=true"),
                    Catch::Contains("plain_keys") && Catch::Contains("layout=dotnet"));
  auto locks = dotnet_layout();
  CHECK_THROWS_WITH(locks->create_lock("job:dlock-fence").try_acquire(),
                    Catch::Contains(":dlock-fence"));
}

TEST_CASE("layout=dotnet writes .NET's keys: a string, a set and a writer, a sorted set",
          "[redis][dotnet_layout]") {
  auto locks = dotnet_layout();
  const auto name = support::unique_name("layout");
  const std::string key = prefix() + name;
  {
    auto held = locks->create_lock(name).acquire(10s);
    CHECK(redis_cli({"TYPE", key}) == "string");
    CHECK(std::stoll(redis_cli({"PTTL", key})) > 0);
    CHECK(redis_cli({"GET", key + ":dlock-fence"}) == std::to_string(held.fencing_token()));
  }
  CHECK(redis_cli({"EXISTS", key}) == "0");
  {
    auto rw = locks->create_reader_writer_lock(name + "-rw");
    auto read = rw.acquire_read(10s);
    CHECK(redis_cli({"TYPE", key + "-rw.readers"}) == "set");
    CHECK(redis_cli({"SCARD", key + "-rw.readers"}) == "1");
    read.release();
    auto write = rw.acquire_write(10s);
    CHECK(redis_cli({"TYPE", key + "-rw.writer"}) == "string");
  }
  {
    auto slot = locks->create_semaphore(name + "-sem", 3).acquire(10s);
    CHECK(redis_cli({"TYPE", key + "-sem"}) == "zset");
    CHECK(redis_cli({"ZCARD", key + "-sem"}) == "1");
    CHECK(locks->create_semaphore(name + "-sem", 3).current_count() == 2u);
  }
}

TEST_CASE("layout=dotnet: a foreign writer's waiting mark holds readers back, and a stopped "
          "dlock writer removes its own",
          "[redis][dotnet_layout]") {
  auto locks = dotnet_layout();
  const auto name = support::unique_name("marks");
  const std::string writer = prefix() + name + ".writer";
  auto rw = locks->create_reader_writer_lock(name);
  // A .NET writer waiting behind readers leaves "<its id>_WRITERWAITING" in the writer key.
  REQUIRE(redis_cli({"SET", writer, "net-writer_WRITERWAITING", "PX", "60000"}) == "OK");
  CHECK_FALSE(rw.try_acquire_read());
  CHECK_FALSE(rw.try_acquire_write());
  REQUIRE(redis_cli({"DEL", writer}) == "1");
  auto read = rw.acquire_read(10s);

  // A dlock writer that waits behind the reader leaves its mark, and takes it away when stopped.
  std::stop_source stop;
  const auto waits_before = locks->metrics().waits;
  auto writing = rw.async_try_acquire_write(60s, stop.get_token(), boost::asio::use_future);
  REQUIRE(support::wait_until([&] { return locks->metrics().waits > waits_before; }));
  CHECK(redis_cli({"GET", writer}).ends_with("_WRITERWAITING"));
  CHECK_FALSE(rw.try_acquire_read());  // held back by the mark, like .NET's readers
  stop.request_stop();
  REQUIRE(writing.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(writing.get());
  REQUIRE(support::wait_until([&] { return redis_cli({"EXISTS", writer}) == "0"; }));
  CHECK(rw.try_acquire_read());
}

TEST_CASE("layout=dotnet: a lock and a semaphore of one name share a key, and say so",
          "[redis][dotnet_layout]") {
  auto locks = dotnet_layout();
  const auto name = support::unique_name("clash");
  auto slot = locks->create_semaphore(name, 2).acquire(10s);
  CHECK_THROWS_AS(locks->create_lock(name).try_acquire(), std::invalid_argument);
  CHECK_THROWS_WITH(locks->create_lock(name).try_acquire(),
                    Catch::Contains(prefix() + name) && Catch::Contains("semaphore") &&
                        Catch::Contains("lock"));
  slot.release();
  auto held = locks->create_lock(name).acquire(10s);
  CHECK_THROWS_AS(locks->create_semaphore(name, 2).try_acquire(), std::invalid_argument);
}

TEST_CASE("layout=dotnet refuses to inspect, list, break or check a token, naming the layout",
          "[redis][dotnet_layout]") {
  auto locks = dotnet_layout();
  CHECK_THROWS_AS(locks->create_lock("any").is_current(1), std::invalid_argument);
  CHECK_THROWS_WITH(locks->create_reader_writer_lock("any").is_current_write(1),
                    Catch::Contains("layout=dotnet"));
  auto plain = dlock::make_provider(endpoint() + "?plain_keys=true&prefix=" + prefix());
  CHECK_THROWS_WITH(plain->create_lock("any").is_current(1), Catch::Contains("plain_keys"));
  CHECK_THROWS_AS(locks->inspect("any"), dlock::unsupported_operation);
  CHECK_THROWS_WITH(locks->inspect("any"), Catch::Contains("layout=dotnet"));
  CHECK_THROWS_WITH(locks->list_locks(""), Catch::Contains("layout=dotnet"));
  CHECK_THROWS_WITH(locks->break_lock("any"), Catch::Contains("layout=dotnet"));
}

}  // namespace redis_test
