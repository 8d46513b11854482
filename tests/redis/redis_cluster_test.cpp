// dlock::redis over a Redis Cluster beyond the contract suite, against the redis-cluster group's
// three masters: names on every master held at once and extended there, a waiter on another
// node than the first seed woken by its shard channel, and a slot migrated while a lock of it is
// held (ASK while it migrates, MOVED after).
#include <catch2/catch.hpp>

#include <future>
#include <map>

#include <dlock/dlock.hpp>
#include <dlock/redis/provider.hpp>

#include "cluster_slots.hpp"
#include "../servers/redis_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::redis_connection;

namespace {

const std::string& prefix() {
  static const std::string value = support::unique_name("redis-cluster-test") + ":";
  return value;
}

std::string url(const std::string& options) {
  return support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER") + "?prefix=" +
         prefix() + "&" + options;
}

std::vector<support::host_port> masters() {
  return support::endpoint_hosts(
      support::require_test_server_endpoint("DLOCK_TEST_REDIS_CLUSTER_PLAIN"));
}

std::string lock_key(const std::string& name) {
  return dlock::redis::provider({.servers = {{"127.0.0.1", 6379}}, .key_prefix = prefix()})
      .lock_key(name);
}

std::string ask(const support::host_port& at, const std::vector<std::string>& command) {
  redis_connection redis(at);
  auto answer = redis.command(command);
  if (!answer) throw std::runtime_error("redis " + command.at(0) + " failed: " + redis.error());
  return *answer;
}

/// Which master serves `key`'s slot: the one that does not redirect a read of it.
std::size_t owner_of(const std::string& key) {
  const auto all = masters();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!ask(all[i], {"EXISTS", key}).starts_with("MOVED")) return i;
  }
  throw std::runtime_error("no master serves " + key);
}

/// One fresh name per master, in the masters' order.
std::vector<std::string> a_name_on_each_master() {
  std::map<std::size_t, std::string> found;
  for (int i = 0; found.size() < masters().size(); ++i) {
    const std::string name = "spread-" + std::to_string(i);
    found.try_emplace(owner_of(lock_key(name)), name);
  }
  std::vector<std::string> names;
  for (auto& [master, name] : found) names.push_back(name);
  return names;
}

/// `key`'s time to live in ms on `at`; with `asking`, read as the importing node of a
/// migrating slot serves it (after ASKING).
long long pttl(const support::host_port& at, const std::string& key, bool asking = false) {
  redis_connection redis(at);
  if (asking && redis.command({"ASKING"}) != "OK") throw std::runtime_error("ASKING failed");
  const auto left = redis.command({"PTTL", key});
  if (!left) throw std::runtime_error("PTTL failed: " + redis.error());
  return std::stoll(*left);
}

/// Waits until `key` on `at` has been extended: its time to live, once it fell below
/// `threshold`, rose above it again (only an extension raises it).
bool extended(const support::host_port& at, const std::string& key,
              std::chrono::milliseconds threshold, bool asking = false) {
  return support::wait_until(
             [&] {
               const long long left = pttl(at, key, asking);
               return left > 0 && left < threshold.count();
             },
             5s) &&
         support::wait_until([&] { return pttl(at, key, asking) > threshold.count(); }, 5s);
}

}  // namespace

TEST_CASE("names on every master are held at once and the watchdog extends each there",
          "[redis][cluster]") {
  auto locks = dlock::make_provider(url("expiry=600ms"));
  const auto names = a_name_on_each_master();
  std::vector<dlock::lock_handle> held;
  for (const auto& name : names) {
    auto handle = locks->create_lock(name).try_acquire();
    REQUIRE(handle);
    held.push_back(std::move(*handle));
  }
  const auto all = masters();
  for (std::size_t i = 0; i < names.size(); ++i) {
    CAPTURE(i);
    // expiry 600 ms, extended every 200 ms: the time to live falls to 400 ms, then back to 600.
    CHECK(extended(all[i], lock_key(names[i]), 500ms));
    CHECK_FALSE(held[i].lost());
  }
  for (auto& handle : held) handle.release();
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(ask(all[i], {"EXISTS", lock_key(names[i])}) == "0");
  }
}

TEST_CASE("a waiter on a name of another master than the first seed is woken by the release",
          "[redis][cluster]") {
  const auto names = a_name_on_each_master();
  const std::string name = names.back();  // not on the first seed
  // A lease far longer than the wait: only the release's message can wake the waiter in time.
  auto holder = dlock::make_provider(url("expiry=30s"));
  auto waiter = dlock::make_provider(url("expiry=30s"));
  auto held = holder->create_lock(name).acquire(5s);
  auto waiting = std::async(std::launch::async,
                            [&] { return waiter->create_lock(name).acquire(10s); });
  const auto at = masters().back();
  const std::string channel = lock_key(name) + ":released";
  REQUIRE(support::wait_until([&] {
    redis_connection redis(at);
    const auto counted = redis.command_elements({"PUBSUB", "SHARDNUMSUB", channel});
    return counted && counted->size() == 2 && (*counted)[1] == "1";
  }));
  held.release();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  auto taken = waiting.get();
  CHECK_FALSE(taken.lost());
}

TEST_CASE("a slot migrated while its lock is held: ASK while it moves, MOVED after, the lock kept",
          "[redis][cluster]") {
  auto locks = dlock::make_provider(url("expiry=900ms"));
  const std::string name = support::unique_name("migrating");
  const std::string key = lock_key(name);
  const std::uint16_t slot = dlock::redis::detail::hash_slot(key);
  auto held = locks->create_lock(name).acquire(5s);

  const auto all = masters();
  const std::size_t from = owner_of(key);
  const std::size_t to = (from + 1) % all.size();
  const std::string from_id = ask(all[from], {"CLUSTER", "MYID"});
  const std::string to_id = ask(all[to], {"CLUSTER", "MYID"});
  const std::string slot_text = std::to_string(slot);
  REQUIRE(ask(all[to], {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", from_id}) == "OK");
  REQUIRE(ask(all[from], {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", to_id}) == "OK");

  // A provider that knows the map from before the migration, and will be sent to the old master.
  auto bystander = dlock::make_provider(url("expiry=900ms"));
  bystander->create_lock(support::unique_name("map-loader")).try_acquire();

  // The held lock's keys move while the slot migrates: the watchdog's extension, sent to the
  // old master, is told ASK and extends the keys on the new one.
  std::vector<std::string> migrate{"MIGRATE", all[to].host, std::to_string(all[to].port), "", "0",
                                   "5000", "KEYS"};
  redis_connection source(all[from]);
  const auto keys = source.command_elements({"CLUSTER", "GETKEYSINSLOT", slot_text, "100"});
  REQUIRE(keys);
  REQUIRE_FALSE(keys->empty());
  migrate.insert(migrate.end(), keys->begin(), keys->end());
  REQUIRE(source.command(migrate) == "OK");
  // expiry 900 ms, extended every 300 ms: 600 to 900 ms left.
  CHECK(extended(all[to], key, 750ms, /*asking=*/true));
  CHECK_FALSE(held.lost());

  // The slot is the new master's: extensions get MOVED there once, then go there directly.
  for (const std::size_t i : {to, from, (to + 1) % all.size()}) {
    REQUIRE(ask(all[i], {"CLUSTER", "SETSLOT", slot_text, "NODE", to_id}) == "OK");
  }
  CHECK(extended(all[to], key, 750ms));
  CHECK_FALSE(held.lost());
  held.release();
  CHECK(ask(all[to], {"EXISTS", key}) == "0");
  // A new acquire by the provider with the old map is told MOVED, and the fencing token goes on
  // from the migrated counter.
  auto again = bystander->create_lock(name).try_acquire();
  REQUIRE(again);
  CHECK(again->fencing_token() == 2);
}
