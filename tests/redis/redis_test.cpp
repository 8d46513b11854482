// dlock::redis beyond the contract suite, against the real test server: bad input, the keys a
// grant leaves, plain-key interoperability with redis-cli, scripts flushed, RedLock counters.
// What a withdrawn wait leaves, max_count mismatches and writer preference are in the contract
// suite (contract/cancel_test.cpp, semaphore_test.cpp, reader_writer_test.cpp).
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <future>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>

#include "redis_test_support.hpp"
#include "scripts.hpp"

using namespace std::chrono_literals;
using redis_test::endpoint;
using redis_test::key_of;
using redis_test::prefix;
using redis_test::redis_cli;
using support::unique_name;

namespace {

std::string url(const std::string& options = "") {
  return endpoint() + "?expiry=2s&prefix=" + prefix() + (options.empty() ? "" : "&" + options);
}

}  // namespace

TEST_CASE("an unreachable server is a connection_error naming it", "[redis][errors]") {
  auto locks = dlock::make_provider("redis://127.0.0.1:1");
  REQUIRE_THROWS_AS(locks->create_lock("x").try_acquire(), dlock::connection_error);
  REQUIRE_THROWS_WITH(locks->create_lock("x").acquire(1s),
                      Catch::Contains("127.0.0.1:1") && Catch::Contains("cannot connect"));
}

TEST_CASE("a wrong password is a connection_error that never shows the password",
          "[redis][errors]") {
  const std::string user = unique_name("user");
  redis_cli({"ACL", "SETUSER", user, "on", ">right-password", "~*", "&*", "+@all"});
  auto wrong = dlock::make_provider("redis://" + user + ":not-the-password@" +
                                    endpoint().substr(8) + "?prefix=" + prefix());
  try {
    (void)wrong->create_lock("x").try_acquire();
    FAIL("acquired with a wrong password");
  } catch (const dlock::connection_error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("authentication failed") &&
                            Catch::Contains(endpoint().substr(8)));
    CHECK_THAT(message, !Catch::Contains("not-the-password") && !Catch::Contains("right-password"));
  }
  // Nothing ran as the default user behind the refused AUTH.
  CHECK(redis_cli({"EXISTS", prefix() + "{x}"}) == "0");
  auto right = dlock::make_provider("redis://" + user + ":right-password@" +
                                    endpoint().substr(8) + "?prefix=" + prefix());
  CHECK(right->create_lock("x").try_acquire());
  redis_cli({"ACL", "DELUSER", user});
}

TEST_CASE("bad URLs and options are invalid_argument naming the field, never the password",
          "[redis][errors]") {
  const std::string host = endpoint().substr(8);
  CHECK_THROWS_WITH(dlock::make_provider("redis://" + host + "/first"),
                    Catch::Contains("database"));
  CHECK_THROWS_WITH(dlock::make_provider("redis://u:secret-pw@" + host + "?expiri=3s"),
                    Catch::Contains("expiri") && !Catch::Contains("secret-pw"));
  CHECK_THROWS_WITH(dlock::make_provider("redis://" + host + "?expiry=3"),
                    Catch::Contains("expiry"));
  CHECK_THROWS_WITH(dlock::make_provider("redis://" + host + "?expiry=3s&extend_every=5s"),
                    Catch::Contains("extend_every"));
  CHECK_THROWS_WITH(dlock::make_provider("redis://" + host + "?expiry=1ms"),
                    Catch::Contains("expiry"));
  CHECK_THROWS_WITH(dlock::make_provider("redis://" + host + "?plain_keys=maybe"),
                    Catch::Contains("plain_keys"));
  CHECK_THROWS_AS(dlock::make_provider("redis:///0"), std::invalid_argument);
}

TEST_CASE("a process forked after it made grants never makes its parent's tokens", "[redis]") {
  const std::string name = unique_name("forked");
  {
    // Tokens made on this thread before the fork (the attempt runs on the caller's thread).
    auto locks = dlock::make_provider(url());
    REQUIRE(locks->create_lock(name).try_acquire());
  }
  int to_parent[2], to_child[2];
  REQUIRE(::pipe(to_parent) == 0);
  REQUIRE(::pipe(to_child) == 0);
  const pid_t child = ::fork();  // no provider alive: this process has no threads of dlock's
  if (child == 0) {
    auto locks = dlock::make_provider(url());
    auto held = locks->create_lock(name).try_acquire();
    char answer = held ? 'y' : 'n';
    if (::write(to_parent[1], &answer, 1) != 1 || ::read(to_child[0], &answer, 1) != 1) _exit(2);
    held.reset();
    _exit(0);
  }
  char answer = 0;
  REQUIRE(::read(to_parent[0], &answer, 1) == 1);
  REQUIRE(answer == 'y');
  auto locks = dlock::make_provider(url());
  // Same thread, same generator state as the child's without a fresh seed: its token, and so
  // "granted again" while the child holds the lock.
  const bool parent_granted = locks->create_lock(name).try_acquire().has_value();
  REQUIRE(::write(to_child[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE_FALSE(parent_granted);
}

TEST_CASE("a database other than 0 holds the keys", "[redis]") {
  auto locks = dlock::make_provider(endpoint() + "/3?prefix=" + prefix());
  const auto name = unique_name("db");
  auto held = locks->create_lock(name).acquire(5s);
  CHECK(redis_cli({"-n", "3", "EXISTS", prefix() + "{" + name + "}"}) == "1");
  CHECK(redis_cli({"EXISTS", prefix() + "{" + name + "}"}) == "0");
}

TEST_CASE("released grants leave no keys but the fencing counter", "[redis]") {
  auto locks = dlock::make_provider(url());
  const auto name = unique_name("clean");
  const std::string tag = prefix() + "{" + name + "}";
  locks->create_lock(name).acquire(5s).release();
  locks->create_reader_writer_lock(name).acquire_read(5s).release();
  locks->create_reader_writer_lock(name).acquire_write(5s).release();
  locks->create_semaphore(name, 2).acquire(5s).release();
  CHECK(redis_cli({"--scan", "--pattern", tag + "*"}) == tag + ":fence");
}

TEST_CASE("a short-expiry holder never shortens the TTL of a set another holder is in",
          "[redis][rw][semaphore]") {
  auto long_expiry = dlock::make_provider(endpoint() + "?expiry=60s&prefix=" + prefix());
  auto short_expiry = dlock::make_provider(endpoint() + "?expiry=1s&prefix=" + prefix());
  const auto name = unique_name("mixed-expiry");
  const std::string tag = prefix() + "{" + name + "}";
  auto ttl_of = [](const std::string& key) { return std::stoll(redis_cli({"PTTL", key})); };

  auto reader = long_expiry->create_reader_writer_lock(name).acquire_read(5s);
  short_expiry->create_reader_writer_lock(name).acquire_read(5s).release();
  // Were the readers' set cut to 1s, it would vanish and a writer would join the reader above.
  CHECK(ttl_of(tag + ":rw:readers") > 30'000);

  auto slot = long_expiry->create_semaphore(name, 2).acquire(5s);
  short_expiry->create_semaphore(name, 2).acquire(5s).release();
  CHECK(ttl_of(tag + ":sem") > 30'000);
  CHECK(ttl_of(tag + ":sem:max") > 30'000);
}

TEST_CASE("the acquire script grants a token again that already holds the grant",
          "[redis][rw][semaphore]") {
  // What an acquire does after the reply to a granted try was lost: it tries again with the
  // same token, and must not wait for its own grant to expire.
  const std::string tag = prefix() + "{" + unique_name("again") + "}";
  const std::string& source = dlock::redis::detail::acquire_script().source;
  auto acquire = [&](const std::string& token, const std::string& kind) {
    const std::string base = tag + ":" + kind;  // one key set per kind
    return redis_cli({"EVAL", source, "4", base, base + ":fence", base + ":set", base + ":queue",
                      token, "60000", kind, "0", "2", "0"});
  };
  for (const std::string kind : {"lock", "write", "read", "sem"}) {
    const std::string first = acquire("token-1", kind);
    REQUIRE(first.rfind("1\n", 0) == 0);
    CHECK(acquire("token-1", kind) == first);  // the same fencing token, not a new one
  }
  CHECK(acquire("token-2", "lock").rfind("0\n", 0) == 0);
}

TEST_CASE("scripts flushed from the server are sent again", "[redis]") {
  auto locks = dlock::make_provider(url());
  const auto name = unique_name("noscript");
  locks->create_lock(name).acquire(5s).release();
  redis_cli({"SCRIPT", "FLUSH"});
  auto held = locks->create_lock(name).acquire(5s);
  CHECK_FALSE(held.lost());
}

TEST_CASE("in plain-key mode dlock and redis-cli SET NX PX exclude each other",
          "[redis][plain]") {
  auto locks = dlock::make_provider(url("plain_keys=true"));
  const auto name = unique_name("plain");
  const std::string key = prefix() + name;

  REQUIRE(redis_cli({"SET", key, "held-by-redis-cli", "NX", "PX", "30000"}) == "OK");
  CHECK_FALSE(locks->create_lock(name).try_acquire(100ms));
  REQUIRE(redis_cli({"DEL", key}) == "1");

  auto held = locks->create_lock(name).acquire(5s);
  CHECK(redis_cli({"SET", key, "other", "NX", "PX", "30000"}).empty());  // nil: refused
  CHECK(redis_cli({"GET", key}).size() == 32);                            // dlock's token
  held.release();
  CHECK(redis_cli({"SET", key, "other", "NX", "PX", "30000"}) == "OK");
  redis_cli({"DEL", key});
}

TEST_CASE("lock names map to keys inside one hash tag, braces and '%' escaped", "[redis][names]") {
  dlock::redis::provider locks({.servers = {{"127.0.0.1", 6379}}});
  CHECK(locks.lock_key("job") == "dlock:{job}");
  CHECK(locks.lock_key("a}b{c%d") == "dlock:{a%7Db%7Bc%25d}");
  // Without the escape, "a}:fence" would land on the fencing counter key of "a".
  CHECK(locks.lock_key("a}:fence") != "dlock:{a}:fence");
  CHECK(locks.lock_key("%7D") != locks.lock_key("}"));
  CHECK(locks.lock_key("ünïcode ✓") == "dlock:{ünïcode ✓}");
  dlock::redis::provider plain({.servers = {{"127.0.0.1", 6379}}, .key_prefix = "", .plain_keys = true});
  CHECK(plain.lock_key("a}b") == "a}b");
  CHECK_THROWS_AS(locks.lock_key(""), std::invalid_argument);
}

TEST_CASE("a RedLock fencing counter that holds no number is that node's error, never a hang",
          "[redis][redlock]") {
  const std::string nodes = redis_test::redlock_endpoint();
  auto locks = dlock::make_provider(nodes + "?expiry=2s&prefix=" + prefix());
  const auto name = unique_name("bad-counter");
  const std::string counter = key_of(name) + ":fence";
  auto try_acquire = [&] {
    auto trying = locks->create_lock(name).async_try_acquire(0ms, {}, boost::asio::use_future);
    REQUIRE(trying.wait_for(10s) == std::future_status::ready);
    return trying.get();
  };
  redis_cli(redis_test::port_of(nodes, 0), {"SET", counter, "not-a-number"});
  CHECK(try_acquire());  // the two other nodes are a majority
  redis_cli(redis_test::port_of(nodes, 1), {"SET", counter, "99999999999999999999999"});
  CHECK_THROWS_WITH(try_acquire(), Catch::Contains("holds no number") && Catch::Contains(counter));
}

TEST_CASE("with plain keys a lock name that is another lock's fencing counter is refused",
          "[redis][names]") {
  auto plain = dlock::make_provider(endpoint() + "?plain_keys=true&prefix=" + prefix());
  const auto name = unique_name("plain");
  CHECK_THROWS_WITH(plain->create_lock(name + ":dlock-fence").try_acquire(),
                    Catch::Contains("dlock-fence") && Catch::Contains(name));
  auto held = plain->create_lock(name).try_acquire();
  REQUIRE(held);
}

TEST_CASE("in plain-key mode a reader-writer lock or semaphore is invalid_argument naming "
          "plain_keys, and nothing reaches the server",
          "[redis][plain]") {
  auto plain = dlock::make_provider(url("plain_keys=true"));
  const auto name = unique_name("plain-only-locks");
  auto rw = plain->create_reader_writer_lock(name);
  auto semaphore = plain->create_semaphore(name, 2);
  CHECK_THROWS_WITH((void)rw.try_acquire_read(),
                    Catch::Contains("plain_keys") && Catch::Contains(name));
  CHECK_THROWS_AS((void)rw.acquire_write(10s), std::invalid_argument);
  CHECK_THROWS_WITH((void)semaphore.try_acquire(),
                    Catch::Contains("plain_keys") && Catch::Contains(name));
  CHECK_THROWS_AS((void)semaphore.current_count(), std::invalid_argument);
  auto async = semaphore.async_acquire(10s, {}, boost::asio::use_future);
  REQUIRE(async.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(async.get(), std::invalid_argument);
  CHECK(redis_cli({"KEYS", prefix() + "*" + name + "*"}).empty());
  // The exclusive lock of the same provider, and a reader-writer lock of a provider without
  // the option, work as ever.
  CHECK(plain->create_lock(name).try_acquire());
  CHECK(dlock::make_provider(url())->create_reader_writer_lock(name).try_acquire_read());
}

TEST_CASE("RedLock fencing tokens rise above a majority's counters when the counters diverge",
          "[redis][redlock]") {
  const std::string nodes = redis_test::redlock_endpoint();
  auto locks = dlock::make_provider(nodes + "?expiry=2s&prefix=" + prefix());
  const auto name = unique_name("diverged");
  const std::string counter = key_of(name) + ":fence";
  // What grants leave behind: the last token (100) on the majority that granted it, an older
  // one on the node that missed it. The counters are read on the first majority to answer
  // (a silent node is not waited for), and any majority holds the last token.
  const std::vector<std::string> seeds{"100", "7", "100"};
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    redis_cli(redis_test::port_of(nodes, i), {"SET", counter, seeds[i]});
  }
  auto first = locks->create_lock(name).acquire(5s);
  CHECK(first.fencing_token() == 101);
  first.release();
  // Every node that granted stored the proposal, so any majority now reads at least 101.
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    CHECK(support::wait_until([&] { return redis_cli(redis_test::port_of(nodes, i), {"GET", counter}) == "101"; }));
  }
  CHECK(locks->create_lock(name).acquire(5s).fencing_token() == 102);
}

TEST_CASE("list_locks takes a prefix literally: glob characters and the tag's escapes in it "
          "match only themselves", "[redis][inspect]") {
  auto locks = dlock::make_provider(endpoint() + "?prefix=" + prefix());
  const std::string base = unique_name("list");
  const std::string listed_prefix = base + "/a*{%}?[x]/";
  auto listed = locks->create_lock(listed_prefix + "held").acquire(5s);
  // What each glob character or escape would match if it were not taken literally.
  auto decoy = locks->create_lock(base + "/aZ{%}?[x]/held").acquire(5s);
  auto escaped_decoy = locks->create_lock(base + "/a*%7B%25%7D?[x]/held").acquire(5s);
  auto plain = dlock::make_provider(endpoint() + "?plain_keys=true&prefix=" + prefix());
  auto plain_held = plain->create_lock(base + "-plain/a*b").acquire(5s);
  auto plain_decoy = plain->create_lock(base + "-plain/aXb").acquire(5s);

  const auto found = locks->list_locks(listed_prefix);
  REQUIRE(found.size() == 1);
  CHECK(found.front().name == listed_prefix + "held");
  const auto found_plain = plain->list_locks(base + "-plain/a*");
  REQUIRE(found_plain.size() == 1);
  CHECK(found_plain.front().name == base + "-plain/a*b");
}
