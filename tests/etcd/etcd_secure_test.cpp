// dlock::etcd over TLS and with authentication, against the etcd-secure group of test servers
// (etcd-tls, etcd-mtls, etcd-auth): locks work with the right CA, client certificate or
// password; every refusal (an unknown CA, a host name the certificate is not for, a missing
// client certificate, a wrong password, a user without permission on the prefix) is a
// connection_error naming its cause; and a provider logs in again once etcd has forgotten its
// auth token.
#include <catch2/catch.hpp>

#include <future>
#include <sstream>
#include <thread>

#include <dlock/dlock.hpp>
#include <dlock/etcd.hpp>

#include "etcd_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::require_test_server_endpoint;
using support::unique_name;

namespace {

/// "127.0.0.1:<port>" of a test server's URL.
std::string endpoint_of(const char* server) {
  return support::etcd_endpoints(require_test_server_endpoint(server));
}

dlock::etcd::options options_for(const char* server) {
  // etcd-auth grants user dlock the keys under auth-test/ only.
  return {.endpoints = endpoint_of(server), .prefix = "auth-test/" + unique_name("secure") + "/",
          .lease_ttl = 3s, .connect_timeout = 3s};
}

/// A file of the test CA's directory (ca.crt, client.key, other-ca.crt, ...).
std::string tls_file(const std::string& name) {
  return require_test_server_endpoint("DLOCK_TEST_TLS_DIR") + "/" + name;
}

dlock::etcd::tls_options trusting(const std::string& ca) {
  return {.enabled = true, .ca_file = tls_file(ca)};
}

dlock::etcd::tls_options with_client_certificate() {
  return {.enabled = true, .ca_file = tls_file("ca.crt"), .cert_file = tls_file("client.crt"),
          .key_file = tls_file("client.key")};
}

/// A lock of the provider excludes a second provider's until it is released.
void require_locks_work(const dlock::etcd::options& opts) {
  auto first = std::make_shared<dlock::etcd::provider>(opts);
  auto second = std::make_shared<dlock::etcd::provider>(opts);
  const std::string name = unique_name("lock");
  auto held = first->create_lock(name).acquire(10s);
  CHECK_FALSE(second->create_lock(name).try_acquire());
  const std::uint64_t token = held.fencing_token();
  held.release();
  auto next = second->create_lock(name).acquire(10s);
  CHECK(next.fencing_token() > token);
}

/// How many keys etcd-auth holds under `prefix` (looked at as root).
std::size_t keys_in(const std::string& prefix) {
  std::istringstream lines(support::etcdctl(
      endpoint_of("DLOCK_TEST_ETCD_AUTH"),
      {"--user=root:root", "get", "--prefix", "--keys-only", prefix}));
  std::size_t keys = 0;
  for (std::string line; std::getline(lines, line);) keys += !line.empty();
  return keys;
}

/// The provider's constructor, which waits for the first lease, fails with `reason`.
void require_refused(dlock::etcd::options opts, const std::string& reason) {
  opts.connect_timeout = 1s;  // a refused handshake is retried until then
  try {
    dlock::etcd::provider refused(opts);
    FAIL("the provider connected");
  } catch (const dlock::connection_error& e) {
    CHECK_THAT(e.what(), Catch::Contains(opts.endpoints) && Catch::Contains(reason));
  }
}

}  // namespace

TEST_CASE("over TLS with the members' CA, locks are granted and exclude, by address or by name",
          "[etcd][tls]") {
  auto opts = options_for("DLOCK_TEST_ETCD_TLS");
  opts.tls = trusting("ca.crt");
  require_locks_work(opts);
  // The certificate is for localhost and 127.0.0.1.
  auto by_name = opts;
  by_name.endpoints.replace(0, 9, "localhost");
  require_locks_work(by_name);
  // The URL form.
  auto locks = dlock::make_provider(require_test_server_endpoint("DLOCK_TEST_ETCD_TLS") + "/" +
                                    unique_name("url") + "?ca=" + tls_file("ca.crt"));
  CHECK(locks->create_lock("job").try_acquire());
}

TEST_CASE("a member whose certificate another CA signed is refused", "[etcd][tls]") {
  auto opts = options_for("DLOCK_TEST_ETCD_TLS");
  opts.tls = trusting("other-ca.crt");
  require_refused(opts, "certificate verify failed");
}

TEST_CASE("a member reached by an address its certificate is not for is refused",
          "[etcd][tls]") {
  auto opts = options_for("DLOCK_TEST_ETCD_TLS");
  opts.tls = trusting("ca.crt");
  opts.endpoints.replace(0, 9, "127.0.0.2");  // the member listens there too
  require_refused(opts, "Peer name 127.0.0.2 is not in peer certificate");
}

TEST_CASE("a member that requires a client certificate refuses a client without one, and "
          "grants with it",
          "[etcd][tls]") {
  auto opts = options_for("DLOCK_TEST_ETCD_MTLS");
  opts.tls = trusting("ca.crt");
  require_refused(opts, "no client certificate was given");
  opts.tls = with_client_certificate();
  require_locks_work(opts);
}

TEST_CASE("with authentication on, the right password grants locks, a wrong one is refused",
          "[etcd][auth]") {
  auto opts = options_for("DLOCK_TEST_ETCD_AUTH");
  opts.user = "dlock";
  opts.password = "dlock";
  require_locks_work(opts);
  opts.password = "wrong";
  require_refused(opts, "authentication as 'dlock' failed");
  require_refused(opts, "invalid user ID or password");
  // Without a user etcd still grants a lease (it checks none), but no key.
  opts.user.clear();
  opts.password.clear();
  auto anonymous = std::make_shared<dlock::etcd::provider>(opts);
  REQUIRE_THROWS_WITH(anonymous->create_lock(unique_name("anonymous")).try_acquire(),
                      Catch::Contains("user name is empty"));
}

TEST_CASE("a user without permission on the prefix hears so, not \"not acquired\"",
          "[etcd][auth]") {
  auto opts = options_for("DLOCK_TEST_ETCD_AUTH");
  opts.user = "stranger";
  opts.password = "stranger";
  auto locks = std::make_shared<dlock::etcd::provider>(opts);  // a lease needs no permission
  auto lock = locks->create_lock(unique_name("forbidden"));
  REQUIRE_THROWS_AS(lock.try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(lock.acquire(5s), Catch::Contains("permission denied"));
}

TEST_CASE("a provider logs in again once etcd has forgotten its auth token, for calls and "
          "watches alike",
          "[etcd][auth]") {
  auto opts = options_for("DLOCK_TEST_ETCD_AUTH");
  opts.user = "dlock";
  opts.password = "dlock";
  auto holder = std::make_shared<dlock::etcd::provider>(opts);
  auto waiter = std::make_shared<dlock::etcd::provider>(opts);
  const std::string name = unique_name("relogin");
  // A round opens the waiter's watch stream, which carries the token it was opened with.
  const auto round = [&] {
    auto held = holder->create_lock(name).acquire(10s);
    auto wait = std::async(std::launch::async, [&] { return waiter->create_lock(name).acquire(20s); });
    REQUIRE(support::wait_until([&] { return keys_in(holder->lock_key_prefix(name)) == 2; }));
    held.release();
    wait.get().release();
  };
  round();
  // etcd-auth forgets a token unused for 1 s (--auth-token-ttl 1), looking every second: both
  // providers' tokens are gone 2 s after their last call. The keepalives do not use the token.
  std::this_thread::sleep_for(2500ms);
  round();
}
