// dlock::zookeeper against the standalone test server: the node layout (Curator's), fencing by
// czxid, ACLs and digest auth, chroot, bad input. What a withdrawn wait leaves and max_count
// mismatches are in the contract suite (contract/cancel_test.cpp, semaphore_test.cpp).
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <optional>
#include <regex>
#include <thread>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER"); }
std::string server_hosts() { return support::zookeeper_hosts(server_url()); }

dlock::zookeeper::options test_options(std::string base_path) {
  return {.hosts = server_hosts(), .base_path = std::move(base_path), .session_timeout = 4s};
}

// `user` with the password "<user>-secret", making nodes under `acl`.
dlock::zookeeper::options digest_options(std::string base_path, const std::string& user,
                                         dlock::zookeeper::acl_policy acl) {
  auto opts = test_options(std::move(base_path));
  opts.user = user;
  opts.password = user + "-secret";
  opts.acl = acl;
  return opts;
}

std::shared_ptr<dlock::zookeeper::provider> make_zookeeper(dlock::zookeeper::options opts) {
  return std::make_shared<dlock::zookeeper::provider>(std::move(opts));
}

}  // namespace

TEST_CASE("a lock is a Curator InterProcessMutex node whose czxid is the fencing token",
          "[zookeeper]") {
  const std::string base = "/" + unique_name("dlock-layout");
  auto zk = make_zookeeper(test_options(base));
  auto held = zk->create_lock("job").acquire(10s);
  const std::string parent = zk->lock_node_path("job");
  CHECK(parent == base + "/job");

  support::zookeeper_session session(server_hosts());
  const auto children = session.children(parent);
  REQUIRE(children.size() == 1);
  const std::regex curator_mutex_node(
      "_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-[0-9]{10}");
  CHECK(std::regex_match(children[0], curator_mutex_node));
  CHECK(static_cast<std::int64_t>(held.fencing_token()) == session.czxid(parent + "/" + children[0]));

  held.release();
  CHECK(session.children(parent).empty());
}

TEST_CASE("reader-writer and semaphore nodes follow Curator's layouts", "[zookeeper]") {
  const std::string base = "/" + unique_name("dlock-layout");
  auto zk = make_zookeeper(test_options(base));
  support::zookeeper_session session(server_hosts());

  auto reader = zk->create_reader_writer_lock("catalog").acquire_read(10s);
  auto children = session.children(base + "/catalog");
  REQUIRE(children.size() == 1);
  CHECK(std::regex_match(children[0], std::regex("_c_[0-9a-f-]{36}-__READ__[0-9]{10}")));
  reader.release();
  // A writer takes the upgrade gate first: an InterProcessMutex in the child `upgrade-gate`.
  auto writer = zk->create_reader_writer_lock("catalog").acquire_write(10s);
  children = session.children(base + "/catalog");
  std::sort(children.begin(), children.end());
  REQUIRE(children.size() == 2);
  CHECK(std::regex_match(children[0], std::regex("_c_[0-9a-f-]{36}-__WRIT__[0-9]{10}")));
  CHECK(children[1] == "upgrade-gate");
  const auto gate = session.children(base + "/catalog/upgrade-gate");
  REQUIRE(gate.size() == 1);
  CHECK(std::regex_match(gate[0], std::regex("_c_[0-9a-f-]{36}-lock-[0-9]{10}")));
  writer.release();
  CHECK(session.children(base + "/catalog/upgrade-gate").empty());

  auto slot = zk->create_semaphore("encoders", 2).acquire(10s);
  children = session.children(base + "/encoders/leases");
  REQUIRE(children.size() == 1);
  CHECK(std::regex_match(children[0], std::regex("_c_[0-9a-f-]{36}-lease-[0-9]{10}")));
  CHECK(session.children(base + "/encoders/locks").empty());  // only held while adding a lease
  CHECK(static_cast<std::int64_t>(slot.fencing_token()) ==
        session.czxid(base + "/encoders/leases/" + children[0]));
}

TEST_CASE("an election's candidate is a LeaderLatch node whose data is the proclaimed value, "
          "and a lock's node carries its owner",
          "[zookeeper][election][inspect]") {
  const std::string base = "/" + unique_name("dlock-layout");
  auto zk = make_zookeeper(test_options(base));
  auto lock = zk->create_lock("scheduler").with_owner("owner of the lock").acquire(10s);
  dlock::leadership lead = zk->create_election("scheduler").campaign("first value", 10s);
  const std::string parent = zk->lock_node_path("scheduler");

  support::zookeeper_session session(server_hosts());
  std::string candidate, locker;
  for (const std::string& child : session.children(parent)) {
    (child.find("-latch-") != std::string::npos ? candidate : locker) = child;
  }
  CHECK(std::regex_match(candidate, std::regex("_c_[0-9a-f-]{36}-latch-[0-9]{10}")));
  CHECK(static_cast<std::int64_t>(lead.term()) == session.czxid(parent + "/" + candidate));
  CHECK(session.data(parent + "/" + candidate) == "first value");
  lead.proclaim("second value");
  CHECK(session.data(parent + "/" + candidate) == "second value");
  CHECK(session.data(parent + "/" + locker) == "owner of the lock");
  lead.resign();
  CHECK(session.children(parent).size() == 1);  // the lock's node stays
}

TEST_CASE("under a read-only-for-others ACL a stranger may inspect a lock but not break it",
          "[zookeeper][acl][inspect]") {
  const std::string base = "/" + unique_name("dlock-acl");
  auto opts = digest_options(base, "carol", dlock::zookeeper::acl_policy::read_only_for_others);
  auto zk = make_zookeeper(opts);
  auto held = zk->create_lock("x").with_owner("carol's job").acquire(10s);
  auto stranger = make_zookeeper(test_options(base));
  const auto found = stranger->inspect("x");
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().owner == "carol's job");
  CHECK_THROWS_WITH(stranger->break_lock("x"), Catch::Contains("not authorized"));
  CHECK_FALSE(held.lost());
  zk->break_lock("x");  // the creator may
  CHECK(wait_until([&] { return held.lost(); }, 5s));
}

TEST_CASE("a node deleted by someone else marks its handle lost and frees the lock",
          "[zookeeper][lost]") {
  const std::string base = "/" + unique_name("dlock-deleted");
  auto zk = make_zookeeper(test_options(base));
  auto other = make_zookeeper(test_options(base));
  auto held = zk->create_lock("x").acquire(10s);
  support::zookeeper_session session(server_hosts());
  const std::string parent = zk->lock_node_path("x");
  const auto children = session.children(parent);
  REQUIRE(children.size() == 1);
  REQUIRE(session.remove(parent + "/" + children[0]) == ZOK);
  CHECK(wait_until([&] { return held.lost(); }, 5s));
  auto next = other->create_lock("x").acquire(10s);
  CHECK(next.fencing_token() > held.fencing_token());
}

namespace {

// A holder and a waiter of lock "x", each with a session of its own, and a plain session that
// looks at (and deletes) their nodes.
struct holder_and_waiter {
  explicit holder_and_waiter(const std::string& base)
      : holder(make_zookeeper(test_options(base))), waiter(make_zookeeper(test_options(base))) {}
  std::shared_ptr<dlock::zookeeper::provider> holder;
  std::shared_ptr<dlock::zookeeper::provider> waiter;
  std::string parent = holder->lock_node_path("x");
  support::zookeeper_session session{server_hosts()};
};

}  // namespace

// A waiter watches its own node while it waits, and its lease adopts that watch at the grant.
TEST_CASE("a node deleted by someone else marks lost a handle whose acquire had waited",
          "[zookeeper][lost]") {
  auto [zk, waiter, parent, session] = holder_and_waiter("/" + unique_name("dlock-deleted-waiter"));
  auto first = zk->create_lock("x").acquire(10s);
  std::optional<dlock::lock_handle> second;
  std::thread waiting([&] { second = waiter->create_lock("x").try_acquire(30s); });
  CHECK(wait_until([&] { return session.children(parent).size() == 2; }, 10s));
  first.release();
  waiting.join();
  REQUIRE(second);
  CHECK_FALSE(second->lost());
  const auto children = session.children(parent);
  REQUIRE(children.size() == 1);
  REQUIRE(session.remove(parent + "/" + children[0]) == ZOK);
  CHECK(wait_until([&] { return second->lost(); }, 5s));
}

TEST_CASE("a waiter whose node someone else deletes queues again at once, behind the holder",
          "[zookeeper][lost]") {
  auto [zk, waiter, parent, session] = holder_and_waiter("/" + unique_name("dlock-deleted-queued"));
  auto held = zk->create_lock("x").acquire(10s);
  const std::string holder_node = session.children(parent).at(0);
  std::optional<dlock::lock_handle> queued;
  std::thread waiting([&] { queued = waiter->create_lock("x").try_acquire(30s); });
  std::string waiter_node;
  CHECK(wait_until([&] {
    for (const auto& child : session.children(parent)) {
      if (child != holder_node) waiter_node = child;
    }
    return !waiter_node.empty();
  }, 10s));
  REQUIRE(session.remove(parent + "/" + waiter_node) == ZOK);
  // Its new node shows up while the lock is still held.
  CHECK(wait_until([&] {
    const auto children = session.children(parent);
    return children.size() == 2 &&
           std::find(children.begin(), children.end(), waiter_node) == children.end();
  }, 5s));
  CHECK_FALSE(held.lost());
  held.release();
  waiting.join();
  REQUIRE(queued);
  CHECK_FALSE(queued->lost());
}

TEST_CASE("a client without the credentials cannot delete a lock node of a creator-only ACL",
          "[zookeeper][acl]") {
  const std::string base = "/" + unique_name("dlock-acl");
  auto opts = digest_options(base, "alice", dlock::zookeeper::acl_policy::creator_only);
  auto zk = make_zookeeper(opts);
  auto held = zk->create_lock("x").acquire(10s);
  const std::string parent = zk->lock_node_path("x");

  support::zookeeper_session stranger(server_hosts());
  // Creator-only: the stranger cannot even list the queue, let alone delete a node in it.
  std::vector<std::string> listed;
  CHECK_THROWS(listed = stranger.children(parent));

  support::zookeeper_session alice(server_hosts());
  alice.add_digest_auth("alice:alice-secret");
  const auto children = alice.children(parent);
  REQUIRE(children.size() == 1);
  CHECK(stranger.remove(parent + "/" + children[0]) == ZNOAUTH);
  CHECK_FALSE(held.lost());

  // The right user with a wrong password is refused with a clear error that hides both.
  auto wrong = opts;
  wrong.password = "not-the-password";
  auto intruder = make_zookeeper(wrong);
  REQUIRE_THROWS_AS(intruder->create_lock("x").try_acquire(), dlock::connection_error);
  try {
    (void)intruder->create_lock("x").try_acquire();
  } catch (const dlock::connection_error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("not authorized") && Catch::Contains(server_hosts()));
    CHECK_THAT(message, !Catch::Contains("not-the-password") && !Catch::Contains("alice-secret"));
  }
}

TEST_CASE("a read-only-for-others ACL lets strangers see the queue but not change it",
          "[zookeeper][acl]") {
  const std::string base = "/" + unique_name("dlock-acl");
  auto opts = digest_options(base, "bob", dlock::zookeeper::acl_policy::read_only_for_others);
  auto zk = make_zookeeper(opts);
  auto held = zk->create_lock("x").acquire(10s);
  const std::string parent = zk->lock_node_path("x");
  support::zookeeper_session stranger(server_hosts());
  const auto children = stranger.children(parent);
  REQUIRE(children.size() == 1);
  CHECK(stranger.remove(parent + "/" + children[0]) == ZNOAUTH);

  auto anonymous = make_zookeeper(test_options(base));
  CHECK_THROWS_AS(anonymous->create_lock("x").try_acquire(), dlock::connection_error);
  CHECK_FALSE(held.lost());
}

TEST_CASE("with a chroot, lock nodes live below it", "[zookeeper][chroot]") {
  const std::string chroot = "/" + unique_name("dlock-chroot");
  support::zookeeper_session session(server_hosts());
  REQUIRE(session.create(chroot) == ZOK);
  auto zk = dlock::make_provider("zookeeper://" + server_hosts() + "/locks?chroot=" + chroot +
                                 "&session_timeout=4s");
  auto held = zk->create_lock("job").acquire(10s);
  CHECK(session.children(chroot + "/locks/job").size() == 1);
  CHECK(zk->endpoint() == server_hosts() + chroot);
}

TEST_CASE("bad URLs and options are invalid_argument naming the field, never the password",
          "[zookeeper][errors]") {
  using Catch::Contains;
  const auto rejects = [](const std::string& url, const std::string& field) {
    INFO(url);
    CHECK_THROWS_AS(dlock::make_provider(url), std::invalid_argument);
    CHECK_THROWS_WITH(dlock::make_provider(url), Contains(field) && !Contains("pw-secret"));
  };
  rejects("zookeeper:///locks", "host");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?session_timeout=soon", "session_timeout");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?session_timeout=0s", "session_timeout");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?connect_timeout=-1s", "connect_timeout");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?release_timeout=0s", "release_timeout");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?session_timeout=999999h", "session_timeout");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?sessiontimeout=1s", "sessiontimeout");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?acl=everyone", "acl");
  rejects("zookeeper://127.0.0.1:1/locks?acl=creator", "acl");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks?chroot=relative", "chroot");
  rejects("zookeeper://u:pw-secret@127.0.0.1:1/locks/", "base_path");
  CHECK_THROWS_WITH(dlock::zookeeper::provider({.hosts = ""}), Contains("hosts"));
}

TEST_CASE("an unreachable ensemble is a connection_error naming every host, not the password",
          "[zookeeper][errors]") {
  const auto started = std::chrono::steady_clock::now();
  const std::string url = "zookeeper://alice:pw-secret@127.0.0.1:1,127.0.0.1:2/locks?connect_timeout=1s";
  REQUIRE_THROWS_AS(dlock::make_provider(url), dlock::connection_error);
  CHECK_THROWS_WITH(dlock::make_provider(url),
                    Catch::Contains("127.0.0.1:1,127.0.0.1:2") && !Catch::Contains("pw-secret"));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
}

TEST_CASE("a chroot that does not exist is a clear error, not a retry loop", "[zookeeper][chroot]") {
  auto opts = test_options("/locks");
  opts.chroot = "/" + unique_name("dlock-no-such-chroot");
  auto zk = make_zookeeper(opts);
  const auto started = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(zk->create_lock("x").acquire(20s), dlock::connection_error);
  CHECK_THROWS_WITH(zk->create_lock("x").try_acquire(),
                    Catch::Contains("chroot") && Catch::Contains(opts.chroot));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
}

TEST_CASE("a process that also loads the threaded C client gets an error naming it, before any "
          "call",
          "[zookeeper][errors][multiprocess]") {
  // The helper with Debian's libzookeeper_mt preloaded: its symbols then come first, as in a
  // program linked with -lzookeeper_mt beside dlock. ASan must be told that the preload comes
  // ahead of its runtime on purpose.
  support::child_process helper(
      {"/bin/sh", "-c",
       "exec env LD_PRELOAD=libzookeeper_mt.so.2 "
       "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\" \"$@\" 2>&1",
       "sh", support::helper_path(), "hold", server_url() + "/" + unique_name("mt"), "x", "lock"});
  helper.close_stdin();
  const std::string output = helper.read_all(30s);
  if (output.find("cannot be preloaded") != std::string::npos) {
    WARN("not run: libzookeeper_mt.so.2 (Debian's libzookeeper-mt2) is not installed");
    return;
  }
  CHECK_THAT(output, Catch::Contains("also loads libzookeeper_mt") &&
                         Catch::Contains(support::zookeeper_hosts(server_url())) &&
                         !Catch::Contains("acquired"));
  const auto status = helper.wait(10s);
  REQUIRE(status);
  CHECK(support::exit_code(*status) != 0);
}
