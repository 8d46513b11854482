// dlock::redis: a waiter that is stopped while its try is in flight leaves nothing in the queues,
// however late the try's reply comes. Part of dlock_redis_fault_tests (it pauses the shared
// server, so it runs alone).
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <stop_token>
#include <thread>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"
#include "scripts.hpp"

namespace redis_test {

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

// The reply that comes last: after a SCRIPT FLUSH the try's EVALSHA is refused (NOSCRIPT) and
// sent again as EVAL, behind whatever else the connection sent meanwhile. A withdrawal sent at
// the stop ran before that EVAL, which then queued the waiter again, with nobody left to
// withdraw it: new readers (or the lock's next waiter) were held back for the whole expiry.
TEST_CASE("a waiter stopped while its try is in flight is withdrawn after the try's late reply",
          "[redis][fault][cancel]") {
  const std::string options = "?expiry=60s&command_timeout=5s&prefix=" + prefix();
  auto holders = dlock::make_provider(endpoint() + options);
  auto waiters = dlock::make_provider(endpoint() + options);
  const auto name = unique_name("withdraw-late");
  const auto lock_name = name + "-lock";
  auto read = holders->create_reader_writer_lock(name).acquire_read(5s);
  auto held = holders->create_lock(lock_name).acquire(5s);

  redis_cli({"SCRIPT", "FLUSH"});
  redis_cli({"SCRIPT", "LOAD", dlock::redis::detail::release_script().source});
  support::undo_test_servers_fault resume({"resume", "redis"});
  support::test_servers({"pause", "redis"});
  std::stop_source stop;
  auto writer = waiters->create_reader_writer_lock(name).async_try_acquire_write(
      60s, stop.get_token(), boost::asio::use_future);
  auto waiter = waiters->create_lock(lock_name).async_try_acquire(60s, stop.get_token(),
                                                                  boost::asio::use_future);
  // Time for both tries to reach the paused server. Were they not there yet, the stop would
  // end the waits before any try: this pause can only make the test pass without proving.
  std::this_thread::sleep_for(300ms);
  stop.request_stop();
  // The callers hear within the stop's grace, not when the server answers.
  REQUIRE(writer.wait_for(2s) == std::future_status::ready);
  REQUIRE(waiter.wait_for(2s) == std::future_status::ready);
  CHECK_FALSE(writer.get());
  CHECK_FALSE(waiter.get());
  resume.now();

  CHECK(wait_until([&] { return redis_cli({"ZCARD", key_of(name) + ":rw:waiting"}) == "0"; }));
  CHECK(wait_until([&] { return redis_cli({"ZCARD", key_of(lock_name) + ":queue"}) == "0"; }));
  // A new reader is not held back by a writer that is gone.
  CHECK(dlock::make_provider(endpoint() + options)
            ->create_reader_writer_lock(name)
            .try_acquire_read());
  held.release();
  CHECK(dlock::make_provider(endpoint() + options)->create_lock(lock_name).try_acquire());
}

}  // namespace redis_test
