// dlock::redis over TLS and Unix sockets, against the redis-tls group of test servers: every way
// TLS can refuse (an unknown CA, an expired certificate, a host name the certificate is not for,
// a missing client certificate, a CA file that cannot be read) is a connection_error naming the
// server and OpenSSL's reason, on the caller's thread and on the network thread alike; bad TLS
// options are std::invalid_argument naming the option. The contract suite runs over TLS and the
// Unix socket as well (contract/backends/redis_tls.cpp).
#include <catch2/catch.hpp>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"

using namespace std::chrono_literals;
using redis_test::tls_file;
using support::require_test_server_endpoint;
using support::unique_name;

namespace {

/// The server (DLOCK_TEST_REDIS_TLS and the like) with `options` after the key prefix.
std::string url(const char* server, const std::string& options) {
  return require_test_server_endpoint(server) + "?prefix=" + unique_name("tls") + ":&" + options;
}

std::string trusting_the_test_ca() { return "tls_ca=" + tls_file("ca.crt"); }

std::string with_client_certificate() {
  return trusting_the_test_ca() + "&tls_cert=" + tls_file("client.crt") +
         "&tls_key=" + tls_file("client.key");
}

/// "127.0.0.1:<port>" of a test server's URL.
std::string endpoint_of(const char* server) {
  const auto at = support::endpoint_hosts(require_test_server_endpoint(server)).at(0);
  return at.host + ":" + std::to_string(at.port);
}

/// Both paths that connect: the caller's thread (a one-shot try) and the network thread (an
/// async acquire) fail with `reason`, naming the server.
void require_refused(const std::string& locks_url, const char* server, const std::string& reason) {
  auto locks = dlock::make_provider(locks_url);
  auto lock = locks->create_lock(unique_name("refused"));
  const std::string endpoint = endpoint_of(server);
  REQUIRE_THROWS_AS(lock.try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(lock.try_acquire(), Catch::Contains(endpoint) && Catch::Contains(reason));
  auto async = lock.async_acquire(5s, {}, boost::asio::use_future);
  REQUIRE(async.wait_for(30s) == std::future_status::ready);
  REQUIRE_THROWS_AS(async.get(), dlock::connection_error);
  auto again = lock.async_acquire(5s, {}, boost::asio::use_future);
  REQUIRE(again.wait_for(30s) == std::future_status::ready);
  REQUIRE_THROWS_WITH(again.get(), Catch::Contains(endpoint) && Catch::Contains(reason));
}

void require_granted(const std::string& locks_url) {
  auto locks = dlock::make_provider(locks_url);
  auto held = locks->create_lock(unique_name("granted")).try_acquire();
  REQUIRE(held);
  held->release();
}

}  // namespace

TEST_CASE("TLS with the server's CA verifies its address or its name, with or without a client "
          "certificate when the server leaves that optional", "[redis][tls]") {
  require_granted(url("DLOCK_TEST_REDIS_TLS", trusting_the_test_ca()));
  require_granted(url("DLOCK_TEST_REDIS_TLS", with_client_certificate()));
  // The certificate is for localhost and 127.0.0.1.
  std::string by_name = require_test_server_endpoint("DLOCK_TEST_REDIS_TLS");
  by_name.replace(by_name.find("127.0.0.1"), 9, "localhost");
  require_granted(by_name + "?" + trusting_the_test_ca());
}

TEST_CASE("a server certificate signed by a CA the client does not trust is refused",
          "[redis][tls]") {
  require_refused(url("DLOCK_TEST_REDIS_TLS", "tls_ca=" + tls_file("other-ca.crt")),
                  "DLOCK_TEST_REDIS_TLS", "certificate verify failed");
  // tls_verify=none trusts any certificate: encryption without authentication.
  require_granted(url("DLOCK_TEST_REDIS_TLS", "tls_ca=" + tls_file("other-ca.crt") +
                                                   "&tls_verify=none"));
}

TEST_CASE("an expired server certificate is refused", "[redis][tls]") {
  require_refused(url("DLOCK_TEST_REDIS_TLS_EXPIRED", trusting_the_test_ca()),
                  "DLOCK_TEST_REDIS_TLS_EXPIRED", "certificate has expired");
}

TEST_CASE("a certificate for another host name is refused unless only the CA is checked",
          "[redis][tls]") {
  require_refused(
      url("DLOCK_TEST_REDIS_TLS", trusting_the_test_ca() + "&tls_server_name=wrong.example"),
      "DLOCK_TEST_REDIS_TLS", "hostname mismatch");
  require_granted(url("DLOCK_TEST_REDIS_TLS",
                      trusting_the_test_ca() + "&tls_server_name=wrong.example&tls_verify=ca"));
  // tls_verify=ca still checks the chain.
  require_refused(url("DLOCK_TEST_REDIS_TLS", "tls_ca=" + tls_file("other-ca.crt") +
                                                   "&tls_verify=ca"),
                  "DLOCK_TEST_REDIS_TLS", "certificate verify failed");
}

TEST_CASE("a server that requires a client certificate refuses a client without one",
          "[redis][tls]") {
  require_refused(url("DLOCK_TEST_REDIS_MTLS", trusting_the_test_ca()), "DLOCK_TEST_REDIS_MTLS",
                  "certificate required");
  require_granted(url("DLOCK_TEST_REDIS_MTLS", with_client_certificate()));
}

TEST_CASE("TLS files that cannot be used are a connection_error naming the option and the file",
          "[redis][tls]") {
  require_refused(url("DLOCK_TEST_REDIS_TLS", "tls_ca=/nonexistent/ca.crt"),
                  "DLOCK_TEST_REDIS_TLS", "tls_ca '/nonexistent/ca.crt': No such file");
  // A key that is not the certificate's.
  require_refused(url("DLOCK_TEST_REDIS_TLS", trusting_the_test_ca() + "&tls_cert=" +
                                                   tls_file("client.crt") +
                                                   "&tls_key=" + tls_file("server.key")),
                  "DLOCK_TEST_REDIS_TLS", "tls_key '" + tls_file("server.key") + "'");
}

TEST_CASE("bad TLS and socket options are invalid_argument naming the option", "[redis][tls]") {
  const std::string tls = require_test_server_endpoint("DLOCK_TEST_REDIS_TLS");
  REQUIRE_THROWS_WITH(dlock::make_provider(tls + "?tls_verify=maybe"),
                      Catch::Contains("tls_verify") && Catch::Contains("maybe"));
  REQUIRE_THROWS_WITH(dlock::make_provider(tls + "?tls_cert=" + tls_file("client.crt")),
                      Catch::Contains("tls_key"));
  REQUIRE_THROWS_WITH(dlock::make_provider(tls + "?tls_key=" + tls_file("client.key")),
                      Catch::Contains("tls_cert"));
  REQUIRE_THROWS_WITH(dlock::make_provider("redis://127.0.0.1:6379?tls_ca=/x.crt"),
                      Catch::Contains("rediss://"));
  REQUIRE_THROWS_WITH(dlock::make_provider("redis+unix://"), Catch::Contains("names no socket"));
  REQUIRE_THROWS_WITH(dlock::make_provider("redis+unix:///run/redis.sock?database=x"),
                      Catch::Contains("database"));
  REQUIRE_THROWS_AS(dlock::make_provider("redis+unix:///run/redis.sock?tls_ca=/x.crt"),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(
      dlock::redis::provider({.servers = {{.host = {}, .unix_socket = "/run/redis.sock"}},
                              .tls = {.enabled = true}}),
      Catch::Contains("Unix socket"));
}

TEST_CASE("a Unix socket takes a database option, and a missing socket is a connection_error "
          "naming its path", "[redis][unix]") {
  const std::string socket = require_test_server_endpoint("DLOCK_TEST_REDIS_UNIX");
  require_granted(socket + "?database=3&prefix=" + unique_name("unix") + ":");
  auto missing = dlock::make_provider("redis+unix:///nonexistent/redis.sock");
  REQUIRE_THROWS_WITH(missing->create_lock("x").try_acquire(),
                      Catch::Contains("/nonexistent/redis.sock") &&
                          Catch::Contains("No such file"));
}

TEST_CASE("RedLock over TLS: a majority of servers that pass verification grants, and a "
          "minority is a connection_error naming the server that failed", "[redis][tls]") {
  const auto host_of = [](const char* server) { return endpoint_of(server); };
  const std::string good_two = "rediss://" + host_of("DLOCK_TEST_REDIS_TLS") + "," +
                               host_of("DLOCK_TEST_REDIS_MTLS") + "," +
                               host_of("DLOCK_TEST_REDIS_TLS_EXPIRED");
  require_granted(good_two + "?prefix=" + unique_name("redlock-tls") + ":&" +
                  with_client_certificate());
  // Without the client certificate only one of the three lets us in.
  auto locks = dlock::make_provider(good_two + "?prefix=" + unique_name("redlock-tls") + ":&" +
                                    trusting_the_test_ca());
  REQUIRE_THROWS_WITH(locks->create_lock("x").try_acquire(),
                      Catch::Contains(host_of("DLOCK_TEST_REDIS_TLS_EXPIRED") +
                                      ": cannot connect: TLS handshake failed") &&
                          Catch::Contains("certificate has expired"));
}
