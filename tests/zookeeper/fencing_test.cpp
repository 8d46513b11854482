// docs/fencing.md's ZooKeeper recipe: a multi-op that checks the writer's lock node still exists
// with the write refuses a paused holder's stale write after a newer holder wrote.
#include <catch2/catch.hpp>
#include <zookeeper/zookeeper.h>

#include <dlock/dlock.hpp>

#include "../servers/zookeeper_client.hpp"
#include "paused_holder.hpp"
#include "support.hpp"

using namespace std::chrono_literals;

namespace {

std::string standalone_url() { return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER"); }

/// The recipe: set `data_node` to `value` only while `lock_node` (the writer's grant, from
/// dlock::zookeeper::provider::granted_node) exists, in one transaction. ZOK when written;
/// ZNONODE when the grant is gone (the session expired, or the lock was broken). The
/// single-threaded client's zoo_amulti, whose answer the session waits for, as docs/fencing.md
/// does with its poll loop.
int fenced_set(support::zookeeper_session& zk, const std::string& lock_node,
               const std::string& data_node, const std::string& value) {
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
  zoo_check_op_init(&ops[0], lock_node.c_str(), -1);  // version -1: exists, any version
  zoo_set_op_init(&ops[1], data_node.c_str(), value.data(), static_cast<int>(value.size()), -1,
                  nullptr);
  return zk.call([&](zhandle_t* zh, void_completion_t done, const void* data) {
    return zoo_amulti(zh, 2, ops, results, done, data);
  });
}

}  // namespace

TEST_CASE("granted_node names the grant's node while held, and nothing for other handles",
          "[zookeeper][fencing]") {
  const std::string base = "/" + support::unique_name("fencing");
  auto zk = dlock::make_provider(standalone_url() + base);
  auto* provider = dynamic_cast<dlock::zookeeper::provider*>(zk.get());
  REQUIRE(provider);
  auto held = zk->create_lock("report").acquire(10s);
  const auto node = dlock::zookeeper::provider::granted_node(held);
  REQUIRE(node);
  CHECK(node->rfind(provider->lock_node_path("report") + "/", 0) == 0);
  support::zookeeper_session raw(support::zookeeper_hosts(standalone_url()));
  CHECK(raw.czxid(*node) == static_cast<std::int64_t>(held.fencing_token()));

  held.release();
  CHECK_FALSE(dlock::zookeeper::provider::granted_node(held));
  auto memory = std::make_shared<dlock::memory::provider>();
  CHECK_FALSE(dlock::zookeeper::provider::granted_node(memory->create_lock("x").acquire()));
}

TEST_CASE("a holder paused past its session timeout has its stale write refused by the "
          "check-and-set multi-op",
          "[zookeeper][fencing][multiprocess]") {
  const std::string base = "/" + support::unique_name("fencing");
  const std::string url = standalone_url() + base + "?session_timeout=2s";
  const std::string name = "paused-writer";
  auto successor = dlock::make_provider(url);
  auto* provider = dynamic_cast<dlock::zookeeper::provider*>(successor.get());
  REQUIRE(provider);
  support::zookeeper_session raw(support::zookeeper_hosts(standalone_url()));
  const std::string data_node = base + "-orders";
  REQUIRE(raw.create(data_node) == ZOK);

  std::string stale_node;
  support::run_paused_holder(url, name, *successor, 20s, {
    .while_held = [&](std::uint64_t) {
      const auto children = raw.children(provider->lock_node_path(name));
      REQUIRE(children.size() == 1);
      stale_node = provider->lock_node_path(name) + "/" + children.front();
      CHECK(fenced_set(raw, stale_node, data_node, "while-held") == ZOK);
    },
    .newer_writes = [&](const dlock::lock_handle& newer) {
      const auto node = dlock::zookeeper::provider::granted_node(newer);
      REQUIRE(node);
      CHECK(fenced_set(raw, *node, data_node, "newer") == ZOK);
    },
    .stale_writes = [&](std::uint64_t) {
      CHECK(fenced_set(raw, stale_node, data_node, "stale") == ZNONODE);
    },
  });
  CHECK(raw.data(data_node) == "newer");
  CHECK(raw.remove(data_node) == ZOK);
}
