// dlock::zookeeper and Apache Curator (Debian's 5.4 jars) on the same paths: each waits for
// the other, because dlock writes the nodes of Curator's recipes. The Java side is
// tests/zookeeper/curator/CuratorHolder.java, built by the test build.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string server_hosts() {
  return support::zookeeper_hosts(support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER"));
}

/// Whether the tests can run; says why not when Java is absent.
bool java_available() {
  if (!std::string(DLOCK_CURATOR_MISSING).empty()) {
    FAIL("Java is installed but not Curator's jars: apt-get install " DLOCK_CURATOR_MISSING);
  }
  if (std::string(DLOCK_JAVA).empty()) {
    // A skip must mean "no Java here", never a build that failed to find it.
    if (std::system("command -v javac >/dev/null 2>&1") == 0) {
      FAIL("a JDK is installed but this build found none: reconfigure (cmake --preset default)");
    }
    WARN("Curator interoperability not tested: no JDK found at configure time "
         "(apt-get install default-jdk-headless, then reconfigure)");
    return false;
  }
  return true;
}

/// A Java process that holds `path` with a Curator recipe until release().
class curator_holder {
 public:
  curator_holder(const std::string& path, const std::string& mode)
      : process_({DLOCK_JAVA, "-cp", DLOCK_CURATOR_CLASSPATH, "CuratorHolder", server_hosts(),
                  path, mode}) {}
  /// True once Curator reports the lock acquired (the JVM takes a second to start).
  bool acquired(std::chrono::milliseconds timeout = 60s) {
    return process_.read_line(timeout) == std::optional<std::string>("acquired");
  }
  /// True when Curator has not reported a grant within `within`.
  bool still_waiting(std::chrono::milliseconds within) { return !process_.read_line(within); }
  bool release() {
    process_.close_stdin();
    return process_.read_line(30s) == std::optional<std::string>("released");
  }

 private:
  support::child_process process_;
};

std::size_t queue_length(const std::string& path) {
  return support::zookeeper_session(server_hosts()).children(path).size();
}

std::shared_ptr<dlock::zookeeper::provider> make_zookeeper() {
  return std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
      .hosts = server_hosts(), .base_path = "/" + unique_name("dlock-curator")});
}

}  // namespace

TEST_CASE("dlock waits for Curator's InterProcessMutex on the same path, and the other way round",
          "[zookeeper][curator]") {
  if (!java_available()) return;
  auto zk = make_zookeeper();
  auto lock = zk->create_lock("job");
  const std::string path = zk->lock_node_path("job");

  curator_holder curator(path, "mutex");
  REQUIRE(curator.acquired());
  CHECK_FALSE(lock.try_acquire());
  std::optional<dlock::lock_handle> ours;
  std::thread waiting([&] { ours = lock.try_acquire(60s); });
  CHECK(wait_until([&] { return queue_length(path) == 2; }));
  CHECK(curator.release());
  waiting.join();
  REQUIRE(ours);

  curator_holder next(path, "mutex");
  CHECK(wait_until([&] { return queue_length(path) == 2; }, 30s));  // Curator queued behind us
  CHECK(next.still_waiting(300ms));
  ours.reset();
  CHECK(next.acquired());
  CHECK(next.release());
}

TEST_CASE("Curator's InterProcessMutex passes a dlock minimum hold's node by, which dlock's "
          "acquirers still respect",
          "[zookeeper][curator][min_hold]") {
  if (!java_available()) return;
  auto zk = make_zookeeper();
  const std::string path = zk->lock_node_path("job");
  auto held = zk->create_lock("job").with_min_hold(120s).acquire(10s);
  curator_holder curator(path, "mutex");
  // Our node, the hold's TTL node and Curator's: Curator sorts the hold node last and waits
  // for our node only.
  CHECK(wait_until([&] { return queue_length(path) == 3; }, 30s));
  CHECK(curator.still_waiting(300ms));
  held.release();
  CHECK(curator.acquired());
  CHECK(curator.release());
  // Curator does not read the hold node; dlock does: the hold lasts.
  CHECK_FALSE(zk->create_lock("job").try_acquire());
}

TEST_CASE("dlock's reader-writer lock and Curator's InterProcessReadWriteLock exclude each other",
          "[zookeeper][curator]") {
  if (!java_available()) return;
  auto zk = make_zookeeper();
  auto rw = zk->create_reader_writer_lock("catalog");
  const std::string path = zk->lock_node_path("catalog");

  curator_holder reader(path, "read");
  REQUIRE(reader.acquired());
  CHECK(rw.try_acquire_read());  // readers share
  CHECK_FALSE(rw.try_acquire_write());
  CHECK(reader.release());
  auto writer = rw.acquire_write(10s);

  curator_holder blocked(path, "read");
  CHECK(wait_until([&] { return queue_length(path) == 2; }, 30s));
  CHECK(blocked.still_waiting(300ms));
  writer.release();
  CHECK(blocked.acquired());
  CHECK(blocked.release());
}

TEST_CASE("dlock's semaphore and Curator's InterProcessSemaphoreV2 count the same leases",
          "[zookeeper][curator]") {
  if (!java_available()) return;
  auto zk = make_zookeeper();
  const std::string path = zk->lock_node_path("encoders");
  auto semaphore = zk->create_semaphore("encoders", 2);

  curator_holder curator(path, "semaphore:2");
  REQUIRE(curator.acquired());
  auto ours = semaphore.try_acquire();
  REQUIRE(ours);
  CHECK_FALSE(semaphore.try_acquire());  // Curator's lease and ours fill both slots
  CHECK(curator.release());
  CHECK(semaphore.try_acquire());
}

TEST_CASE("a dlock candidate and Curator's LeaderLatch on the same path never lead at once",
          "[zookeeper][curator][election]") {
  if (!java_available()) return;
  auto zk = make_zookeeper();
  dlock::election election = zk->create_election("scheduler");
  const std::string path = zk->lock_node_path("scheduler");

  curator_holder curator(path, "latch:java-1");
  REQUIRE(curator.acquired());
  // The latch leads with its participant id as the value, its node's czxid as the term.
  const auto java_leader = election.leader();
  REQUIRE(java_leader);
  CHECK(java_leader->value == "java-1");
  CHECK_FALSE(election.try_campaign("dlock-1"));
  std::optional<dlock::leadership> ours;
  std::thread waiting([&] { ours = election.try_campaign("dlock-1", 60s); });
  CHECK(wait_until([&] { return queue_length(path) == 2; }));
  CHECK(curator.release());
  waiting.join();
  REQUIRE(ours);
  CHECK(ours->term() > java_leader->term);
  CHECK(election.leader() == dlock::leader_info{"dlock-1", ours->term()});

  curator_holder next(path, "latch:java-2");
  CHECK(wait_until([&] { return queue_length(path) == 2; }, 30s));  // the latch queued behind us
  CHECK(next.still_waiting(300ms));
  ours.reset();  // resigns
  CHECK(next.acquired());
  const auto second = election.leader();
  REQUIRE(second);
  CHECK(second->value == "java-2");
  CHECK(next.release());
}

TEST_CASE("inspect shows a Curator InterProcessMutex holder with the address Curator writes",
          "[zookeeper][curator][inspect]") {
  if (!java_available()) return;
  auto zk = make_zookeeper();
  const std::string path = zk->lock_node_path("job");
  curator_holder curator(path, "mutex");
  REQUIRE(curator.acquired());
  const auto found = zk->inspect("job");
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().kind == dlock::party_kind::exclusive);
  // Curator's default node data: the host's address, the owner for dlock's inspector.
  CHECK_FALSE(found.holders.front().owner.empty());
  support::zookeeper_session session(server_hosts());
  const auto children = session.children(path);
  REQUIRE(children.size() == 1);
  CHECK(found.holders.front().fencing_token ==
        static_cast<std::uint64_t>(session.czxid(path + "/" + children.front())));
  CHECK(curator.release());
}
