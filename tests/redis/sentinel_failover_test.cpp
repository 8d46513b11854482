// dlock::redis through Redis Sentinel while the master fails over, against the redis-failover
// group (a master, two replicas and three sentinels of its own, so that the contract suite's
// group never moves): a forced failover (SENTINEL FAILOVER) while a lock is held, with the
// grant replicated (the handle is proven on the new master and keeps excluding others) and with
// the grant missing there (the handle is lost); a master killed with SIGKILL under a holder; a
// waiter through a forced failover and through a killed master. In every case the fencing token never goes back and new acquires work on the new
// master. Each test starts by waiting for a settled deployment (the sentinels agree on a master
// with two replicas online), so it does not matter where the last one left the master.
#include <catch2/catch.hpp>

#include <functional>
#include <future>
#include <stdexcept>

#include <dlock/dlock.hpp>

#include "../servers/redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::host_port;
using support::redis_connection;
using support::require_test_server_endpoint;

namespace {

const char* const node_ids[] = {"failover-master", "failover-replica1", "failover-replica2"};

std::vector<host_port> sentinels() {
  return support::endpoint_hosts(require_test_server_endpoint("DLOCK_TEST_REDIS_FAILOVER"));
}

/// The data nodes, in the order of node_ids (the master as started first).
std::vector<host_port> nodes() {
  return support::endpoint_hosts(require_test_server_endpoint("DLOCK_TEST_REDIS_FAILOVER_NODES"));
}

std::optional<std::string> ask(const host_port& at, const std::vector<std::string>& command) {
  try {
    redis_connection redis(at, 1s);
    return redis.command(command);
  } catch (const std::runtime_error&) {
    return std::nullopt;  // down (a killed master): not an error while waiting
  }
}

std::vector<std::string> ask_elements(const host_port& at, const std::vector<std::string>& command) {
  try {
    redis_connection redis(at, 1s);
    return redis.command_elements(command).value_or(std::vector<std::string>{});
  } catch (const std::runtime_error&) {
    return {};
  }
}

/// Where sentinel `at` says the master is, if it answers.
std::optional<int> master_port_by(const host_port& at) {
  const auto address = ask_elements(at, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
  if (address.size() != 2) return std::nullopt;
  return std::stoi(address[1]);
}

host_port node_on(int port) { return {"127.0.0.1", port}; }

/// Whether every sentinel names the same master, with no failover under way, and the master
/// says it is one with both replicas online: a deployment that a test can fail over. A former
/// master that still thinks it is one (the sentinels demote it only at their next look, up to
/// 10 s later) is made a replica of the agreed master here, as they would.
std::optional<int> settled_master() {
  std::optional<int> agreed;
  for (const auto& sentinel : sentinels()) {
    const auto port = master_port_by(sentinel);
    if (!port || (agreed && *agreed != *port)) return std::nullopt;
    agreed = port;
    const auto master = ask_elements(sentinel, {"SENTINEL", "MASTER", "mymaster"});
    for (std::size_t i = 0; i + 1 < master.size(); i += 2) {
      if (master[i] == "flags" && master[i + 1] != "master") return std::nullopt;
      if (master[i] == "num-other-sentinels" && master[i + 1] != "2") return std::nullopt;
    }
  }
  for (const auto& node : nodes()) {
    if (node.port == *agreed) continue;
    const auto role = ask_elements(node, {"ROLE"});
    if (!role.empty() && role[0] == "master") {
      ask(node, {"REPLICAOF", "127.0.0.1", std::to_string(*agreed)});
    }
  }
  const auto info = ask(node_on(*agreed), {"INFO", "replication"});
  if (!info || support::redis_info_field(*info, "role") != "master" ||
      support::redis_info_field(*info, "connected_slaves") != "2" ||
      support::redis_info_field(*info, "slave0").find("state=online") == std::string::npos ||
      support::redis_info_field(*info, "slave1").find("state=online") == std::string::npos) {
    return std::nullopt;
  }
  return agreed;
}

int wait_for_settled_master() {
  std::optional<int> master;
  if (!support::wait_until([&] { return (master = settled_master()).has_value(); }, 60s)) {
    throw std::runtime_error("the redis-failover deployment did not settle within 60 s");
  }
  return *master;
}

/// Whether sentinel 0 names a master other than `old_port` that says it is the master; sets
/// `moved` to its port.
bool moved_from(int old_port, std::optional<int>& moved) {
  moved = master_port_by(sentinels()[0]);
  if (!moved || *moved == old_port) return false;
  const auto role = ask_elements(node_on(*moved), {"ROLE"});
  return !role.empty() && role[0] == "master";
}

/// Waits until the sentinels have failed the master over by themselves (it was killed).
int wait_for_new_master(int old_port) {
  std::optional<int> moved;
  if (!support::wait_until([&] { return moved_from(old_port, moved); }, 30s)) {
    throw std::runtime_error("no new master within 30 s");
  }
  return *moved;
}

/// Forces a failover (SENTINEL FAILOVER) and waits for the new master. A sentinel may refuse
/// (INPROG, NOGOODSLAVE) or abort a failover when its view of a replica is stale (a former
/// master made a replica a moment ago): asked again whenever none is under way.
int fail_over(int old_port) {
  std::optional<int> moved;
  const bool done = support::wait_until(
      [&] {
        if (moved_from(old_port, moved)) return true;
        const auto master = ask_elements(sentinels()[0], {"SENTINEL", "MASTER", "mymaster"});
        for (std::size_t i = 0; i + 1 < master.size(); i += 2) {
          if (master[i] == "flags" &&
              master[i + 1].find("failover_in_progress") == std::string::npos) {
            ask(sentinels()[0], {"SENTINEL", "FAILOVER", "mymaster"});
          }
        }
        return false;
      },
      45s);
  if (!done) throw std::runtime_error("no new master within 45 s of SENTINEL FAILOVER");
  return *moved;
}

std::string url_with(std::string_view expiry) {
  return require_test_server_endpoint("DLOCK_TEST_REDIS_FAILOVER") + "?expiry=" +
         std::string(expiry) + "&prefix=" + support::unique_name("failover") + ":";
}

std::string_view prefix_of(const std::string& provider_url) {
  return std::string_view(provider_url).substr(provider_url.find("prefix=") + 7);
}

/// Whether the key's lease on `at` has grown since the last call: an extension reached it.
struct extension_seen {
  host_port at;
  std::string key;
  long long last = -1;
  bool operator()() {
    const auto pttl = ask(at, {"PTTL", key});
    if (!pttl) return false;
    const long long now = std::stoll(*pttl);
    const bool grew = last >= 0 && now > last;
    last = now;
    return grew;
  }
};

/// The lock "job" held through a provider of its own with the given expiry, and where its
/// grant lives.
struct job_holder {
  explicit job_holder(std::string_view expiry)
      : url(url_with(expiry)),
        locks(dlock::make_provider(url)),
        key(dlock::redis::provider(
                {.servers = {{"127.0.0.1", 1}}, .key_prefix = std::string(prefix_of(url))})
                .lock_key("job")),
        held(locks->create_lock("job").acquire(5s)),
        before(held.fencing_token()) {}

  /// The token of the next grant of "job", through another provider.
  std::uint64_t next_token() const {
    return dlock::make_provider(url)->create_lock("job").acquire(10s).fencing_token();
  }

  std::string url;
  std::shared_ptr<dlock::provider> locks;
  std::string key;
  dlock::lock_handle held;
  std::uint64_t before;
};

/// The test-servers id of the data node on `port`.
std::string node_id(int port) {
  const auto all = nodes();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].port == port) return node_ids[i];
  }
  throw std::runtime_error("no data node on port " + std::to_string(port));
}

/// While a lock is held, a waiter of another provider waits for it; `move_master` moves the
/// master meanwhile; then the holder lets go. The waiter must end within a bound, granted with
/// a higher token or with a connection_error, and the next acquire works on the new master.
void wait_through(const std::function<void()>& move_master) {
  job_holder job("3s");
  auto others = dlock::make_provider(job.url);
  auto waiter = std::async(std::launch::async, [&]() -> std::optional<std::uint64_t> {
    try {
      return others->create_lock("job").acquire(30s).fencing_token();
    } catch (const dlock::connection_error&) {
      return std::nullopt;
    }
  });
  move_master();
  try {
    job.held.release();
  } catch (const dlock::connection_error&) {
    // Released or not, its lease runs out within the expiry.
  }
  REQUIRE(waiter.wait_for(40s) == std::future_status::ready);
  const std::optional<std::uint64_t> token = waiter.get();
  if (token) CHECK(*token > job.before);
  CHECK(job.next_token() > job.before);
}

}  // namespace

TEST_CASE("a grant replicated before a forced failover is proven on the new master and keeps "
          "others out, and the next token is higher",
          "[redis][sentinel][fault]") {
  const int old_master = wait_for_settled_master();
  job_holder job("10s");  // its copy on the new master outlives the failover

  const int new_master = fail_over(old_master);
  // The watchdog, told of the switch, extends on the new master (the key is there: proven).
  REQUIRE(support::wait_until(extension_seen{node_on(new_master), job.key}, 15s));
  CHECK_FALSE(job.held.lost());
  CHECK_FALSE(dlock::make_provider(job.url)->create_lock("job").try_acquire());
  job.held.release();
  CHECK(job.next_token() > job.before);
}

TEST_CASE("a grant missing on the new master after a forced failover marks its handle lost, and "
          "the next token is higher although the new master's counter is behind",
          "[redis][sentinel][fault]") {
  const int old_master = wait_for_settled_master();
  const auto all = nodes();
  std::vector<host_port> replicas;
  for (const auto& node : all) {
    if (node.port != old_master) replicas.push_back(node);
  }
  REQUIRE(replicas.size() == 2);
  job_holder job("5s");
  const std::string& key = job.key;
  // Whichever replica is promoted misses the grant and the counter, as replicas that the
  // last writes never reached.
  for (const auto& replica : replicas) {
    REQUIRE(support::wait_until([&] { return ask(replica, {"EXISTS", key}) == "1"; }));
    REQUIRE(ask(replica, {"CONFIG", "SET", "replica-read-only", "no"}) == "OK");
    REQUIRE(ask(replica, {"DEL", key, key + ":fence"}) == "2");
    REQUIRE(ask(replica, {"CONFIG", "SET", "replica-read-only", "yes"}) == "OK");
  }

  const int new_master = fail_over(old_master);
  CHECK(new_master != old_master);
  REQUIRE(support::wait_until([&] { return job.held.lost(); }, 15s));
  CHECK(job.next_token() > job.before);
}

TEST_CASE("a waiter during a forced failover gets the lock on the new master or a "
          "connection_error, and never hangs",
          "[redis][sentinel][fault]") {
  const int old_master = wait_for_settled_master();
  wait_through([&] { fail_over(old_master); });
}

TEST_CASE("a waiter while the master is killed with SIGKILL gets the lock on the new master or a "
          "connection_error, and never hangs",
          "[redis][sentinel][fault]") {
  const int old_master = wait_for_settled_master();
  const std::string killed = node_id(old_master);
  std::optional<support::undo_test_servers_fault> restart;
  wait_through([&] {
    support::test_servers({"kill", killed});
    restart.emplace(std::vector<std::string>{"restart", killed});
    wait_for_new_master(old_master);
  });
  restart->now();
  wait_for_settled_master();
}

TEST_CASE("a master killed with SIGKILL under a holder: the handle is lost or proven on the new "
          "master, and the next token is higher",
          "[redis][sentinel][fault]") {
  const int old_master = wait_for_settled_master();
  const std::string killed = node_id(old_master);
  job_holder job("2s");

  support::test_servers({"kill", killed});
  support::undo_test_servers_fault restart({"restart", killed});
  const int new_master = wait_for_new_master(old_master);
  extension_seen proven{node_on(new_master), job.key};
  REQUIRE(support::wait_until([&] { return job.held.lost() || proven(); }, 15s));
  if (!job.held.lost()) job.held.release();
  CHECK(job.next_token() > job.before);
  restart.now();
  // The old master comes back as a master of its own; the sentinels make it a replica.
  wait_for_settled_master();
}

TEST_CASE("an election's term never goes back across a failover, even when the new master "
          "missed the lead and the term counter",
          "[redis][sentinel][fault][election]") {
  const int old_master = wait_for_settled_master();
  const std::string url = url_with("5s");
  auto candidates = dlock::make_provider(url);
  auto lead = candidates->create_election("board").campaign("first", 5s);
  const auto first_term = lead.term();
  const std::string base =
      dlock::redis::provider(
          {.servers = {{"127.0.0.1", 1}}, .key_prefix = std::string(prefix_of(url))})
          .lock_key("board");
  // Whichever replica is promoted misses the lead, its record and the counter.
  for (const auto& replica : nodes()) {
    if (replica.port == old_master) continue;
    REQUIRE(support::wait_until([&] { return ask(replica, {"EXISTS", base + ":leader"}) == "1"; }));
    REQUIRE(ask(replica, {"CONFIG", "SET", "replica-read-only", "no"}) == "OK");
    REQUIRE(ask(replica, {"DEL", base + ":election", base + ":leader", base + ":fence"}) == "3");
    REQUIRE(ask(replica, {"CONFIG", "SET", "replica-read-only", "yes"}) == "OK");
  }

  fail_over(old_master);
  REQUIRE(support::wait_until([&] { return lead.lost(); }, 15s));
  auto next = dlock::make_provider(url)->create_election("board").campaign("second", 10s);
  CHECK(next.term() > first_term);
  const auto seen = candidates->create_election("board").leader();
  REQUIRE(seen);
  CHECK(seen->value == "second");
  CHECK(seen->term == next.term());
}
