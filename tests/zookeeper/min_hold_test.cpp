// A minimum hold at ZooKeeper (zookeeper/src/min_hold.hpp): the TTL node a grant leaves beside
// the queue, how Curator's and older dlock's orderings pass it by, and what ends it. What every
// backend keeps (an early release, a killed holder, the CLI) is in the contract suite.
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

#include "min_hold.hpp"
#include "node_layout.hpp"
#include "support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;
using dlock::zookeeper::detail::is_hold_node;
using dlock::zookeeper::detail::queue_order;
using dlock::zookeeper::detail::takes_min_hold;
using support::unique_name;
using support::wait_until;

namespace {

std::shared_ptr<dlock::zookeeper::provider> make_zookeeper(const std::string& base_path) {
  return std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
      .hosts = support::zookeeper_hosts(
          support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER")),
      .base_path = base_path,
      .session_timeout = 4s});
}

std::string hosts() {
  return support::zookeeper_hosts(support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER"));
}

// Curator's StandardLockInternalsDriver.fixForSorting: the text after the last `lock-`, or the
// whole name; LockInternals sorts every child by it, filtering none out.
std::string curator_sort_key(const std::string& child) {
  const auto at = child.rfind("lock-");
  return at == std::string::npos ? child : child.substr(at + 5);
}

bool has_hold_node(support::zookeeper_session& session, const std::string& parent) {
  const auto children = session.children(parent);
  return std::any_of(children.begin(), children.end(),
                     [](const std::string& c) { return is_hold_node(c); });
}

}  // namespace

TEST_CASE("a hold node is left out of the queue, and sorts after every sequence for Curator",
          "[zookeeper][unit][min_hold]") {
  const std::vector<std::string> children{"min-hold-4294967310", "_c_b-min-hold-lock-0000000002",
                                          "_c_a-lock-0000000001", "_c_c-lock-0000000003"};
  const auto queue = queue_order(children);
  REQUIRE(queue.size() == 3);
  CHECK(queue[1].name == "_c_b-min-hold-lock-0000000002");
  CHECK(queue[1].excludes_readers);
  CHECK(is_hold_node("min-hold-4294967310"));
  CHECK_FALSE(is_hold_node("_c_b-min-hold-lock-0000000002"));
  CHECK_FALSE(is_hold_node("min-hold-"));
  CHECK(takes_min_hold("_c_b-min-hold-lock-0000000002"));
  CHECK_FALSE(takes_min_hold("_c_a-lock-0000000001"));
  std::vector<std::string> curator_order = children;
  std::sort(curator_order.begin(), curator_order.end(), [](const auto& a, const auto& b) {
    return curator_sort_key(a) < curator_sort_key(b);
  });
  CHECK(curator_order.back() == "min-hold-4294967310");
}

TEST_CASE("a grant with a minimum hold leaves a TTL node beside its own, which an early "
          "release keeps and the holder deletes at the hold's end",
          "[zookeeper][min_hold]") {
  const std::string base = "/" + unique_name("dlock-min-hold");
  auto zk = make_zookeeper(base);
  auto other = make_zookeeper(base);
  const std::string parent = zk->lock_node_path("job");
  const auto asked = std::chrono::steady_clock::now();
  auto held = zk->create_lock("job").with_min_hold(2s).acquire(10s);
  const auto token = held.fencing_token();
  const std::string hold_node = "min-hold-" + std::to_string(token);

  support::zookeeper_session session(hosts());
  auto children = session.children(parent);
  std::sort(children.begin(), children.end());
  REQUIRE(children.size() == 2);
  CHECK(std::regex_match(children[0], std::regex("_c_[0-9a-f-]{36}-min-hold-lock-[0-9]{10}")));
  CHECK(children[1] == hold_node);
  // The data is the hold in milliseconds (the server shows clients no TTL in a node's stat).
  CHECK(session.data(parent + "/" + hold_node) == "2000");

  held.release();
  if (std::chrono::steady_clock::now() - asked < 1s) {
    CHECK(session.children(parent) == std::vector<std::string>{hold_node});
    const auto found = other->inspect("job");
    REQUIRE(found.holders.size() == 1);
    CHECK(found.holders[0].fencing_token == token);
    CHECK(other->create_lock("job").is_current(token));
  }
  auto next = other->create_lock("job").acquire(30s);
  CHECK(std::chrono::steady_clock::now() - asked >= 2s - 20ms);
  CHECK(next.fencing_token() > token);
  CHECK_FALSE(has_hold_node(session, parent));
}

TEST_CASE("a holder deletes its hold node at the hold's end, so that its death after it frees "
          "the lock as soon as without a hold",
          "[zookeeper][min_hold]") {
  const std::string base = "/" + unique_name("dlock-min-hold-over");
  auto zk = make_zookeeper(base);
  auto held = zk->create_lock("job").with_min_hold(300ms).acquire(10s);
  support::zookeeper_session session(hosts());
  const std::string parent = zk->lock_node_path("job");
  CHECK(has_hold_node(session, parent));
  CHECK(wait_until([&] { return !has_hold_node(session, parent); }, 10s));
  CHECK_FALSE(held.lost());
}

TEST_CASE("break_lock ends a minimum hold with its holder", "[zookeeper][min_hold]") {
  const std::string base = "/" + unique_name("dlock-min-hold-break");
  auto zk = make_zookeeper(base);
  auto other = make_zookeeper(base);
  auto held = zk->create_lock("job").with_min_hold(60s).acquire(10s);
  held.release();
  CHECK_FALSE(other->create_lock("job").try_acquire());
  other->break_lock("job");
  CHECK(other->create_lock("job").try_acquire());
}
