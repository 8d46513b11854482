// dlock::postgres over TLS: libpq does the work, and the URL's sslmode, sslrootcert, sslcert and
// sslkey reach it. The test server serves TLS with a certificate of the test CA
// (scripts/test-servers.sh, DLOCK_TEST_TLS_DIR) and still accepts plain connections.
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using support::require_test_server_endpoint;
using support::unique_name;

namespace {

std::string tls_file(const std::string& name) {
  return require_test_server_endpoint("DLOCK_TEST_TLS_DIR") + "/" + name;
}

std::string url_with(const std::string& options) {
  return require_test_server_endpoint("DLOCK_TEST_POSTGRES") + "?" + options;
}

/// Whether the server's session of `application` runs over TLS (pg_stat_ssl).
bool session_uses_tls(const std::string& application) {
  pqxx::connection connection(require_test_server_endpoint("DLOCK_TEST_POSTGRES"));
  pqxx::work query(connection);
  const auto rows = query.exec(
      "select s.ssl from pg_stat_ssl s join pg_stat_activity a using (pid) "
      "where a.application_name = " + query.quote(application));
  return rows.size() == 1 && rows[0][0].as<bool>();
}

}  // namespace

TEST_CASE("sslmode=verify-full with the server's CA connects over TLS and checks the address",
          "[postgres][tls]") {
  const std::string application = unique_name("tls");
  auto locks = dlock::make_provider(url_with("sslmode=verify-full&sslrootcert=" +
                                             tls_file("ca.crt") + "&application_name=" +
                                             application));
  auto held = locks->create_lock(unique_name("verified")).try_acquire();
  REQUIRE(held);
  CHECK(session_uses_tls(application));
}

TEST_CASE("a server certificate of a CA the client does not trust is a connection_error",
          "[postgres][tls]") {
  auto locks = dlock::make_provider(
      url_with("sslmode=verify-full&sslrootcert=" + tls_file("other-ca.crt")));
  REQUIRE_THROWS_AS(locks->create_lock("x").try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(locks->create_lock("x").try_acquire(),
                      Catch::Contains("127.0.0.1") && Catch::Contains("certificate verify failed"));
}

TEST_CASE("sslcert and sslkey reach libpq", "[postgres][tls]") {
  // A certificate without its key is refused by libpq before the server is asked.
  auto locks = dlock::make_provider(url_with("sslmode=require&sslcert=" + tls_file("client.crt") +
                                             "&sslkey=/nonexistent/client.key"));
  REQUIRE_THROWS_WITH(locks->create_lock("x").try_acquire(),
                      Catch::Contains("/nonexistent/client.key"));
  auto with_key = dlock::make_provider(url_with("sslmode=verify-ca&sslrootcert=" +
                                                tls_file("ca.crt") + "&sslcert=" +
                                                tls_file("client.crt") + "&sslkey=" +
                                                tls_file("client.key")));
  CHECK(with_key->create_lock(unique_name("client-cert")).try_acquire());
}
