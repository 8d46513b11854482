// dlock::zookeeper under faults: killed and paused holders, a killed ensemble member, a lost
// quorum, a server that dies while a wait is withdrawn. These kill, pause and restart servers
// that other tests share, so they run alone (RUN_SERIAL) and leave the servers healthy.
#include <signal.h>
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>
#include <thread>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string standalone_url() {
  return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER");
}
std::string ensemble_url() {
  return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER_ENSEMBLE");
}

std::shared_ptr<dlock::zookeeper::provider> make_zookeeper(const std::string& url,
                                                           const std::string& base,
                                                           std::chrono::milliseconds session) {
  return std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
      .hosts = support::zookeeper_hosts(url), .base_path = base, .session_timeout = session});
}

/// A helper process holding the lock `name` under `base` with a 2 s session.
struct helper_holder {
  helper_holder(const std::string& base, const std::string& name)
      : process({support::helper_path(), "hold", standalone_url() + base + "?session_timeout=2s",
                 name, "lock"}) {
    const auto line = process.read_line(30s);
    if (!line || line->rfind("acquired ", 0) != 0) {
      throw std::runtime_error("helper did not acquire: " + line.value_or("(nothing)"));
    }
    token = std::stoull(line->substr(9));
  }
  support::child_process process;
  std::uint64_t token = 0;
};

/// A provider on the ensemble holding the lock "x" under a fresh base path.
struct ensemble_holder {
  ensemble_holder(const std::string& base_name, std::chrono::milliseconds session)
      : base("/" + unique_name(base_name)),
        zk(make_zookeeper(ensemble_url(), base, session)),
        held(zk->create_lock("x").acquire(30s)) {}
  std::string base;
  std::shared_ptr<dlock::zookeeper::provider> zk;
  dlock::lock_handle held;
};

/// The index of the ensemble member whose watches include `node` (the member our session is
/// connected to: a session's watches live on its server), or nullopt.
std::optional<std::size_t> member_watching(const std::string& node) {
  const auto members = support::endpoint_hosts(ensemble_url());
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto watches = support::zookeeper_four_letter_word(members[i].port, "wchc", 1s);
    if (watches && watches->find(node) != std::string::npos) return i;
  }
  return std::nullopt;
}

std::string only_child(const std::string& url, const std::string& parent) {
  support::zookeeper_session session(support::zookeeper_hosts(url));
  const auto children = session.children(parent);
  if (children.size() != 1) throw std::runtime_error("expected one node under " + parent);
  return parent + "/" + children[0];
}

}  // namespace

TEST_CASE("a holder killed with SIGKILL frees the lock once its session expires",
          "[zookeeper][fault][multiprocess]") {
  const std::string base = "/" + unique_name("dlock-killed");
  helper_holder holder(base, "x");
  auto waiter = make_zookeeper(standalone_url(), base, 4s);
  CHECK_FALSE(waiter->create_lock("x").try_acquire());
  holder.process.signal(SIGKILL);
  REQUIRE(holder.process.wait());
  auto next = waiter->create_lock("x").acquire(30s);
  CHECK(next.fencing_token() > holder.token);
}

TEST_CASE("a holder paused past its session timeout sees its lock lost; the next holder's "
          "token is higher",
          "[zookeeper][fault][multiprocess]") {
  const std::string base = "/" + unique_name("dlock-paused");
  helper_holder holder(base, "x");
  auto waiter = make_zookeeper(standalone_url(), base, 4s);
  holder.process.signal(SIGSTOP);
  auto next = waiter->create_lock("x").acquire(30s);
  CHECK(next.fencing_token() > holder.token);
  holder.process.signal(SIGCONT);
  CHECK(holder.process.read_line(30s) == std::optional<std::string>("lost"));
  CHECK_FALSE(next.lost());
}

TEST_CASE("killing the ensemble member a holder is connected to moves its session, and the "
          "lock stays held",
          "[zookeeper][fault][ensemble]") {
  ensemble_holder holder("dlock-failover", 8s);
  const std::string node = only_child(ensemble_url(), holder.zk->lock_node_path("x"));
  std::optional<std::size_t> serving;
  REQUIRE(wait_until([&] { return (serving = member_watching(node)).has_value(); }, 10s));

  const std::string member = "zk" + std::to_string(*serving + 1);
  support::undo_test_servers_fault restart({"restart", member});
  support::test_servers({"kill", member});
  CHECK(wait_until([&] {
    const auto now = member_watching(node);
    return now && *now != *serving;
  }, 30s));
  CHECK_FALSE(holder.held.lost());
  auto other = make_zookeeper(ensemble_url(), holder.base, 8s);
  CHECK_FALSE(other->create_lock("x").try_acquire());
  restart.now();
  CHECK_FALSE(holder.held.lost());
}

TEST_CASE("with a majority of the ensemble down the handle is lost, and a new acquire works "
          "once quorum returns",
          "[zookeeper][fault][ensemble]") {
  ensemble_holder holder("dlock-quorum", 3s);
  auto& zk = holder.zk;
  auto& held = holder.held;
  const auto token = held.fencing_token();
  support::undo_test_servers_fault restart_zk1({"restart", "zk1"});
  support::undo_test_servers_fault restart_zk2({"restart", "zk2"});
  support::test_servers({"kill", "zk1"});
  support::test_servers({"kill", "zk2"});
  CHECK(wait_until([&] { return held.lost(); }, 30s));
  // No server answers for a session timeout: acquires fail with the ensemble named.
  CHECK(wait_until([&] {
    try {
      (void)zk->create_lock("y").try_acquire(1s);
      return false;
    } catch (const dlock::connection_error& e) {
      return std::string(e.what()).find(support::zookeeper_hosts(ensemble_url())) !=
             std::string::npos;
    }
  }, 30s));
  restart_zk1.now();
  restart_zk2.now();
  try {
    held.release();  // the session may have survived the election: delete our node if so
  } catch (const dlock::connection_error&) {
  }
  auto again = zk->create_lock("x").acquire(60s);
  CHECK(again.fencing_token() > token);
}

TEST_CASE("a wait withdrawn while the server is down ends at once, and its node is deleted "
          "once the server is back",
          "[zookeeper][fault][cancel]") {
  const std::string base = "/" + unique_name("dlock-withdraw-down");
  auto holder = make_zookeeper(standalone_url(), base, 20s);
  auto waiter = make_zookeeper(standalone_url(), base, 20s);
  auto held = holder->create_lock("x").acquire(10s);
  const std::string parent = holder->lock_node_path("x");
  const auto queue_length = [&] {
    return support::zookeeper_session(support::zookeeper_hosts(standalone_url()))
        .children(parent)
        .size();
  };

  std::stop_source stop;
  std::optional<dlock::lock_handle> outcome;
  std::thread waiting([&] { outcome = waiter->create_lock("x").try_acquire(60s, stop.get_token()); });
  const bool queued = wait_until([&] { return queue_length() == 2; }, 10s);
  {
    support::undo_test_servers_fault restart({"restart", "zookeeper"});
    support::test_servers({"kill", "zookeeper"});
    const auto stopped_at = std::chrono::steady_clock::now();
    stop.request_stop();
    waiting.join();
    CHECK(std::chrono::steady_clock::now() - stopped_at < 1s);
    restart.now();
  }
  CHECK(queued);
  CHECK_FALSE(outcome.has_value());
  CHECK(wait_until([&] { return queue_length() == 1; }, 30s));
}

TEST_CASE("a wait withdrawn while its create is unanswered (server paused) ends at once, and "
          "its node is deleted once the server answers",
          "[zookeeper][fault][cancel]") {
  const std::string base = "/" + unique_name("dlock-withdraw-paused");
  auto waiter = make_zookeeper(standalone_url(), base, 20s);
  const std::string parent = waiter->lock_node_path("x");
  std::stop_source stop;
  std::optional<dlock::lock_handle> outcome;
  std::string error;
  {
    support::undo_test_servers_fault resume({"resume", "zookeeper"});
    support::test_servers({"pause", "zookeeper"});
    std::thread waiting([&] {
      try {
        outcome = waiter->create_lock("x").try_acquire(60s, stop.get_token());
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    // Setup only: lets the create reach the (paused) server; the stop must end the wait at
    // once however long the create stays unanswered.
    std::this_thread::sleep_for(300ms);
    const auto stopped_at = std::chrono::steady_clock::now();
    stop.request_stop();
    waiting.join();
    CHECK(std::chrono::steady_clock::now() - stopped_at < 1s);
    resume.now();
  }
  CHECK(error.empty());
  CHECK_FALSE(outcome.has_value());
  support::zookeeper_session session(support::zookeeper_hosts(standalone_url()));
  CHECK(wait_until([&] { return session.children(parent).empty(); }, 30s));
}
