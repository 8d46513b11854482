// dlock::redis over a Redis Cluster beyond the contract suite, against the redis-cluster group's
// three masters: names on every master held at once and extended there, a waiter on another
// node than the first seed woken by its shard channel, and a slot migrated while a lock of it is
// held (ASK while it migrates, MOVED after).
#include <catch2/catch.hpp>

#include <future>
#include <stdexcept>

#include <dlock/dlock.hpp>

#include "cluster_slots.hpp"
#include "redis_cluster_support.hpp"

using namespace redis_cluster_test;

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
  CHECK(bystander->create_lock(support::unique_name("map-loader")).try_acquire());

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

TEST_CASE("layout=dotnet on a cluster: a name with a hash tag works, one without is refused "
          "when its lock is made",
          "[redis][cluster][dotnet_layout]") {
  auto locks = dlock::make_provider(url("layout=dotnet"));
  const auto bare = support::unique_name("dotnet-untagged");
  // Refused when the lock object is made, before anything is sent.
  CHECK_THROWS_AS((void)locks->create_lock(bare), std::invalid_argument);
  CHECK_THROWS_WITH((void)locks->create_reader_writer_lock(bare),
                    Catch::Contains("hash tag") && Catch::Contains(bare));
  CHECK_THROWS_AS((void)locks->create_semaphore(bare, 2), std::invalid_argument);
  const auto tagged = "{" + support::unique_name("dotnet-tagged") + "}";
  auto lock = locks->create_lock(tagged).try_acquire();
  REQUIRE(lock);
  CHECK_FALSE(locks->create_lock(tagged).try_acquire());
  auto rw = locks->create_reader_writer_lock(tagged + ".rw");
  auto read = rw.try_acquire_read();
  REQUIRE(read);
  CHECK_FALSE(rw.try_acquire_write());
  auto slot = locks->create_semaphore(tagged + ".sem", 1).try_acquire();
  REQUIRE(slot);
  CHECK_FALSE(locks->create_semaphore(tagged + ".sem", 1).try_acquire());
  // The keys are .NET's, on the master of the tag's slot.
  const auto at = masters().at(owner_of(prefix() + tagged));
  CHECK(ask(at, {"TYPE", prefix() + tagged}) == "string");
  CHECK(ask(at, {"TYPE", prefix() + tagged + ".rw.readers"}) == "set");
  CHECK(ask(at, {"TYPE", prefix() + tagged + ".sem"}) == "zset");
}
