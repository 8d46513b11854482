// Curator's node names and queue order (zookeeper/src/node_layout.hpp): pure functions, no server.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "node_layout.hpp"

using dlock::zookeeper::detail::new_protection_prefix;
using dlock::zookeeper::detail::queue_order;

TEST_CASE("protection prefixes are _c_ and a fresh version 4 UUID in Java's form",
          "[zookeeper][unit]") {
  const std::regex java_uuid_prefix(
      "_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string prefix = new_protection_prefix();
    CHECK(std::regex_match(prefix, java_uuid_prefix));
    seen.insert(prefix);
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("the queue is ordered by the sequence after the marker, as Curator sorts it",
          "[zookeeper][unit]") {
  const auto queue = queue_order({
      "_c_ffff-lock-0000000007",
      "leases",                          // a semaphore's child node: not in the queue
      "_c_0000-__READ__0000000003",
      "locks",
      "_c_aaaa-__WRIT__0000000005",
      "someone-lock-12",                 // not ten digits: not a queue node
      "_c_1111-lock-0000000001",
      "_c_2222-lease-0000000002",        // a lease, not a lock node
  });
  REQUIRE(queue.size() == 4);
  CHECK(queue[0].name == "_c_1111-lock-0000000001");
  CHECK(queue[1].name == "_c_0000-__READ__0000000003");
  CHECK(queue[2].name == "_c_aaaa-__WRIT__0000000005");
  CHECK(queue[3].name == "_c_ffff-lock-0000000007");
  CHECK(queue[0].excludes_readers);
  CHECK_FALSE(queue[1].excludes_readers);
  CHECK(queue[2].excludes_readers);
}

TEST_CASE("a node without the protection prefix (an unprotected Curator client) still queues",
          "[zookeeper][unit]") {
  const auto queue = queue_order({"lock-0000000004", "_c_9-lock-0000000002"});
  REQUIRE(queue.size() == 2);
  CHECK(queue[0].sequence == "0000000002");
  CHECK(queue[1].name == "lock-0000000004");
}

TEST_CASE("an election's candidates and the lock's queue on one node leave each other out",
          "[zookeeper][unit]") {
  const std::vector<std::string> children{
      "_c_aaaa-latch-0000000004",
      "_c_bbbb-lock-0000000002",
      "upgrade-gate",
      "_c_cccc-latch-0000000003",
      "_c_dddd-__WRIT__0000000005",
  };
  const auto candidates = dlock::zookeeper::detail::ordered_by(
      children, dlock::zookeeper::detail::latch_marker);
  REQUIRE(candidates.size() == 2);
  CHECK(candidates[0].name == "_c_cccc-latch-0000000003");  // the lowest leads
  CHECK(candidates[1].name == "_c_aaaa-latch-0000000004");
  const auto queue = queue_order(children);
  REQUIRE(queue.size() == 2);
  CHECK(queue[0].name == "_c_bbbb-lock-0000000002");
  CHECK(queue[1].name == "_c_dddd-__WRIT__0000000005");
}
