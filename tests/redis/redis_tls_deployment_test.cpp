// A few locking cases over TLS through Sentinel (`rediss+sentinel://`, the redis-tls-sentinel
// group) or a Redis Cluster (`rediss+cluster://`, the redis-tls-cluster group), and a CA the
// client does not trust refused as a connection_error. The whole contract suite already runs
// over plain Sentinel and Cluster and over TLS to one server; these cases show that the two
// compose. Built twice: DLOCK_TEST_DEPLOYMENT names the endpoint variable of the deployment.
#include <catch2/catch.hpp>

#include <future>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

using namespace std::chrono_literals;
using redis_test::tls_file;
using support::require_test_server_endpoint;
using support::unique_name;

namespace {

/// Every client of one run shares a key prefix of its own, so that they contend.
std::string url_trusting(const std::string& ca_file) {
  static const std::string prefix = unique_name("tls-deployment") + ":";
  return require_test_server_endpoint(DLOCK_TEST_DEPLOYMENT) + "?prefix=" + prefix +
         "&tls_ca=" + tls_file(ca_file);
}

std::shared_ptr<dlock::provider> locks() { return dlock::make_provider(url_trusting("ca.crt")); }

}  // namespace

TEST_CASE("over TLS a lock excludes another client, and the next holder's token is higher",
          "[redis][tls]") {
  auto first = locks();
  auto second = locks();
  const std::string name = unique_name("exclusive");
  auto held = first->create_lock(name).acquire(5s);
  CHECK_FALSE(second->create_lock(name).try_acquire());
  const auto token = held.fencing_token();
  held.release();
  auto next = second->create_lock(name).acquire(5s);
  CHECK(next.fencing_token() > token);
}

TEST_CASE("over TLS a waiter is granted the lock once its holder releases it", "[redis][tls]") {
  auto holder = locks();
  auto waiter = locks();
  const std::string name = unique_name("waited");
  auto held = holder->create_lock(name).acquire(5s);
  auto waiting = waiter->create_lock(name).async_acquire(20s, {}, boost::asio::use_future);
  CHECK(waiting.wait_for(200ms) == std::future_status::timeout);
  held.release();
  REQUIRE(waiting.wait_for(15s) == std::future_status::ready);
  CHECK(waiting.get().held());
}

TEST_CASE("over TLS a semaphore grants max_count slots and readers share a reader-writer lock",
          "[redis][tls]") {
  auto client = locks();
  const std::string slots = unique_name("slots");
  auto one = client->create_semaphore(slots, 2).acquire(5s);
  auto two = client->create_semaphore(slots, 2).acquire(5s);
  CHECK_FALSE(client->create_semaphore(slots, 2).try_acquire());
  two.release();
  CHECK(client->create_semaphore(slots, 2).try_acquire());

  const std::string catalog = unique_name("catalog");
  auto reader = client->create_reader_writer_lock(catalog).acquire_read(5s);
  auto another = locks()->create_reader_writer_lock(catalog).acquire_read(5s);
  CHECK_FALSE(locks()->create_reader_writer_lock(catalog).try_acquire_write());
}

TEST_CASE("over TLS a server certificate of a CA the client does not trust is a "
          "connection_error naming the reason", "[redis][tls]") {
  auto distrusting = dlock::make_provider(url_trusting("other-ca.crt"));
  auto lock = distrusting->create_lock(unique_name("refused"));
  REQUIRE_THROWS_AS(lock.try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(lock.try_acquire(), Catch::Contains("certificate verify failed"));
  auto async = lock.async_acquire(5s, {}, boost::asio::use_future);
  REQUIRE(async.wait_for(30s) == std::future_status::ready);
  REQUIRE_THROWS_AS(async.get(), dlock::connection_error);
}
