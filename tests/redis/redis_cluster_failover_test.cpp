// A Redis Cluster's failover while a lock is held and another waits for it: a master's replica
// takes over (CLUSTER FAILOVER, which waits for the replica to catch up), and dlock follows it:
// the lease is extended on the new master, the waiter is woken there by the release, and the
// fencing token goes on. It changes the cluster every other cluster test uses, so it runs alone
// and gives the slots back to their first master before it ends.
#include <catch2/catch.hpp>

#include <future>

#include <dlock/dlock.hpp>

#include "redis_cluster_support.hpp"

using namespace redis_cluster_test;

namespace {

bool is_master(const support::host_port& at) {
  redis_connection redis(at);
  const auto role = redis.command_elements({"ROLE"});
  return role && !role->empty() && role->front() == "master";
}

/// Has `replica` take over from its master, and waits until both agree. A replica takes over
/// only once in sync (a master just turned replica needs a moment to be).
/// `how`: {} for the ordinary failover (the masters vote), or "TAKEOVER" (no vote: the masters
/// refuse to vote again for the same shard within twice the node timeout, so giving the slots
/// straight back needs it).
void fail_over(const support::host_port& replica, const support::host_port& master,
               const std::string& how = {}) {
  REQUIRE(support::wait_until([&] {
    return support::redis_info_field(ask(replica, {"INFO", "replication"}),
                                     "master_link_status") == "up";
  }, 15s));
  std::vector<std::string> command{"CLUSTER", "FAILOVER"};
  if (!how.empty()) command.push_back(how);
  // A manual failover that gets no votes (another failover of this shard moments ago) gives up
  // after 5 s; it is asked again then.
  bool switched = false;
  for (int attempt = 0; attempt < 3 && !switched; ++attempt) {
    REQUIRE(ask(replica, command) == "OK");
    switched = support::wait_until([&] { return is_master(replica) && !is_master(master); }, 6s);
  }
  REQUIRE(switched);
  // The old master follows the new one (after a TAKEOVER it may stay a master without slots),
  // so that the shard has its replica again for the next failover.
  const std::string new_id = ask(replica, {"CLUSTER", "MYID"});
  REQUIRE(support::wait_until([&] {
    const std::string info = ask(master, {"INFO", "replication"});
    if (support::redis_info_field(info, "role") == "master") {
      ask(master, {"CLUSTER", "REPLICATE", new_id});
      return false;
    }
    return support::redis_info_field(info, "master_port") == std::to_string(replica.port) &&
           support::redis_info_field(info, "master_link_status") == "up";
  }, 15s));
}

}  // namespace

TEST_CASE("a failover while a lock is held and waited for: the new master keeps both going",
          "[redis][cluster][failover]") {
  const auto names = a_name_on_each_master();
  const std::string name = names.front();
  const auto master = masters().front();
  const auto replica = replica_of(master);
  const std::string key = lock_key(name);
  // A long lease extended often: the extension shows within ms, and only the release's message
  // can wake the waiter in time.
  auto holder = dlock::make_provider(url("expiry=30s&extend_every=300ms"));
  auto waiter = dlock::make_provider(url("expiry=30s"));
  auto held = holder->create_lock(name).acquire(5s);
  const auto first_token = held.fencing_token();
  auto waiting = std::async(std::launch::async,
                            [&] { return waiter->create_lock(name).acquire(20s); });
  REQUIRE(support::wait_until([&] {
    redis_connection redis(master);
    const auto counted =
        redis.command_elements({"PUBSUB", "SHARDNUMSUB", key + ":released"});
    return counted && counted->size() == 2 && (*counted)[1] == "1";
  }));

  fail_over(replica, master);
  // Extended on the new master (told MOVED by the old one, now its replica).
  CHECK(extended(replica, key, 29850ms));
  CHECK_FALSE(held.lost());
  held.release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  auto taken = waiting.get();
  CHECK(taken.fencing_token() > first_token);
  taken.release();
  CHECK(ask(replica, {"EXISTS", key}) == "0");

  fail_over(master, replica, "TAKEOVER");
}
