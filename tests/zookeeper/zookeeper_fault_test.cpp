// dlock::zookeeper under faults: killed and paused holders, a killed ensemble member, a lost
// quorum, a server that dies while a wait is withdrawn, waiters and a create's answer cut
// off by a silent server. These kill, pause and restart servers that other tests share, so
// they run alone (RUN_SERIAL) and leave the servers healthy.
#include <signal.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <future>
#include <thread>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "fault_support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"
// The one test-only seam of the backend (off by default), to lose a create's answer.
#include "test_seams.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;
using namespace zookeeper_fault;

namespace {

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

using clock = std::chrono::steady_clock;
/// The session timeout of the providers that a silent server cuts off: short, so the tests are
/// quick, and long enough that a resume right after their acquires fail finds them alive.
constexpr auto session_timeout = 6s;

/// Prints a measured figure (docs/zookeeper.md quotes them; ctest -V shows them).
void report_figure(const char* what, std::chrono::steady_clock::duration took) {
  std::printf("measured: %s: %lld ms\n", what,
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
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

  auto metrics = std::make_shared<dlock::prometheus_metrics>();
  holder.zk->set_metrics_sink(metrics);
  const std::string member = "zk" + std::to_string(*serving + 1);
  support::undo_test_servers_fault restart({"restart", member});
  support::test_servers({"kill", member});
  CHECK(wait_until([&] {
    const auto now = member_watching(node);
    return now && *now != *serving;
  }, 30s));
  CHECK_FALSE(holder.held.lost());
  // The move is a reconnection for the metrics sink.
  const auto reconnected = [&] {
    return metrics->render().find("dlock_reconnects_total{backend=\"zookeeper\"} 1\n") !=
           std::string::npos;
  };
  CHECK(wait_until(reconnected, 30s));
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

TEST_CASE("waiting acquires, sync and async, fail with connection_error before the session "
          "timeout when the server goes silent, and their nodes are deleted once it answers",
          "[zookeeper][fault][partition]") {
  const std::string base = "/" + unique_name("dlock-silent-waiter");
  auto holder = make_zookeeper(standalone_url(), base, 20s);  // outlives the pause
  auto waiter = make_zookeeper(standalone_url(), base, session_timeout);
  std::string sync_error;
  std::atomic<bool> sync_done{false};
  clock::time_point sync_failed_at{}, paused_at{};
  // Joined after the handles below are released, which frees a waiter that never failed.
  std::jthread sync_waiter;
  auto held_x = holder->create_lock("x").acquire(10s);
  auto held_y = holder->create_lock("y").acquire(10s);
  auto own = waiter->create_lock("own").acquire(10s);  // shows whether the session survives

  auto async_result = waiter->create_lock("y").async_acquire(60s, {}, boost::asio::use_future);
  sync_waiter = std::jthread([&] {
    try {
      (void)waiter->create_lock("x").acquire();  // no timeout: must not outlast an outage
    } catch (const dlock::connection_error& e) {
      sync_error = e.what();
    }
    sync_failed_at = clock::now();
    sync_done = true;
  });
  REQUIRE(wait_until([&] {
    return child_count(holder->lock_node_path("x")) == 2 &&
           child_count(holder->lock_node_path("y")) == 2;
  }, 10s));

  std::string async_error;
  clock::time_point async_failed_at{};
  {
    support::undo_test_servers_fault resume({"resume", "zookeeper"});
    support::test_servers({"pause", "zookeeper"});
    paused_at = clock::now();
    CHECK(wait_until([&] {
      if (async_failed_at == clock::time_point{} &&
          async_result.wait_for(0s) == std::future_status::ready) {
        async_failed_at = clock::now();
      }
      return sync_done && async_failed_at != clock::time_point{};
    }, 20s));
    resume.now();
  }
  REQUIRE(sync_done);
  REQUIRE(async_failed_at != clock::time_point{});
  try {
    (void)async_result.get();
  } catch (const dlock::connection_error& e) {
    async_error = e.what();
  }
  CHECK_THAT(sync_error, Catch::Contains("no server of the ensemble reachable"));
  CHECK_THAT(async_error, Catch::Contains("no server of the ensemble reachable"));
  // Before the server may expire the session: the client notices the silence after 2t/3
  // and gives waiters t/6 more.
  CHECK(sync_failed_at - paused_at < session_timeout);
  CHECK(async_failed_at - paused_at < session_timeout);
  report_figure("silent server to a sync waiter's connection_error (t = 6 s)",
                sync_failed_at - paused_at);
  report_figure("silent server to an async waiter's connection_error (t = 6 s)",
                async_failed_at - paused_at);

  // The session survived the pause: the failed waiters' nodes are deleted in it.
  const auto resumed_at = clock::now();
  CHECK(wait_until([&] {
    return child_count(holder->lock_node_path("x")) == 1 &&
           child_count(holder->lock_node_path("y")) == 1;
  }, 15s));
  report_figure("resume to the failed waiters' nodes deleted", clock::now() - resumed_at);
  CHECK_FALSE(own.lost());
  CHECK(child_count(waiter->lock_node_path("own")) == 1);
  // The same provider works again.
  held_x.release();
  CHECK(waiter->create_lock("x").acquire(10s));
}

namespace {

// The base path whose lock node's create answer lose_create_answer() drops, once.
std::string lost_answer_base;
std::atomic<bool> lost_answer_used{false};
std::atomic<bool> lost_answer_pause_failed{false};

bool lose_create_answer(const char* path) {
  if (!std::string_view(path).starts_with(lost_answer_base + "/x/")) return false;
  if (lost_answer_used.exchange(true)) return false;
  // The server made the node and answered; it goes silent before the answer is read, and
  // the answer is dropped: to the client, a create lost with the connection.
  try {
    support::test_servers({"pause", "zookeeper"});
  } catch (...) {
    lost_answer_pause_failed = true;
  }
  return true;
}

}  // namespace

TEST_CASE("an acquire whose create answer is lost to a silent server fails with "
          "connection_error, and the node the create made is deleted once the server answers",
          "[zookeeper][fault][partition]") {
  const std::string base = "/" + unique_name("dlock-lost-create");
  auto zk = make_zookeeper(standalone_url(), base, session_timeout);
  auto own = zk->create_lock("own").acquire(10s);  // shows whether the session survives
  const std::string parent = zk->lock_node_path("x");

  lost_answer_base = base;
  lost_answer_used = false;
  lost_answer_pause_failed = false;
  dlock::zookeeper::detail::set_create_answer_filter(lose_create_answer);
  std::string error;
  clock::duration took{};
  {
    support::undo_test_servers_fault resume({"resume", "zookeeper"});
    const auto started = clock::now();
    try {
      (void)zk->create_lock("x").try_acquire(30s);
    } catch (const dlock::connection_error& e) {
      error = e.what();
    }
    took = clock::now() - started;
    dlock::zookeeper::detail::set_create_answer_filter(nullptr);
    resume.now();
  }
  REQUIRE(lost_answer_used);
  REQUIRE_FALSE(lost_answer_pause_failed);
  CHECK_THAT(error, Catch::Contains("no server of the ensemble reachable"));
  CHECK(took < session_timeout);
  report_figure("lost create answer to connection_error (t = 6 s)", took);

  // The session survived, and with it the node the create made: the provider finds it by
  // its protection prefix once reconnected and deletes it, so another provider gets the lock.
  const auto resumed_at = clock::now();
  CHECK(wait_until([&] { return child_count(parent) == 0; }, 15s));
  report_figure("resume to the orphan node deleted", clock::now() - resumed_at);
  CHECK_FALSE(own.lost());
  auto other = make_zookeeper(standalone_url(), base, session_timeout);
  CHECK(other->create_lock("x").try_acquire(5s));
}

TEST_CASE("a waiting acquire goes on without an error when the ensemble member its session is "
          "on goes silent and the session moves to another member",
          "[zookeeper][fault][ensemble][partition]") {
  const std::string base = "/" + unique_name("dlock-waiter-moves");
  // The waiter connects only to the two followers, so that pausing its member leaves a
  // quorum and a member to move to (a paused leader would take an election first).
  std::string followers;
  for (const auto& member : support::endpoint_hosts(ensemble_url())) {
    if (support::zookeeper_mode(member.port) != "follower") continue;
    if (!followers.empty()) followers += ",";
    followers += "127.0.0.1:" + std::to_string(member.port);
  }
  REQUIRE(std::count(followers.begin(), followers.end(), ',') == 1);
  auto holder = make_zookeeper(ensemble_url(), base, 20s);
  auto first_waiter = make_zookeeper(ensemble_url(), base, 20s);
  auto waiter = std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
      .hosts = followers, .base_path = base, .session_timeout = session_timeout});
  auto held = holder->create_lock("x").acquire(10s);
  auto first = first_waiter->create_lock("x").async_acquire(60s, {}, boost::asio::use_future);
  const std::string parent = holder->lock_node_path("x");
  support::zookeeper_session reader(support::zookeeper_hosts(ensemble_url()));
  REQUIRE(wait_until([&] { return reader.sync(), reader.children(parent).size() == 2; }, 10s));
  auto result = waiter->create_lock("x").async_acquire(60s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return reader.sync(), reader.children(parent).size() == 3; }, 10s));
  // Our waiter watches the first waiter's node (the second in the queue), and nobody else does.
  auto queue = reader.children(parent);
  std::sort(queue.begin(), queue.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.rfind('-') + 1) < b.substr(b.rfind('-') + 1);
  });
  const std::string watched = parent + "/" + queue[1];
  std::optional<std::size_t> serving;
  REQUIRE(wait_until([&] { return (serving = member_watching(watched)).has_value(); }, 10s));

  const std::string member = "zk" + std::to_string(*serving + 1);
  {
    support::undo_test_servers_fault resume({"resume", member});
    support::test_servers({"pause", member});
    const auto paused_at = clock::now();
    CHECK(wait_until([&] {
      const auto now = member_watching(watched);
      return now && *now != *serving;
    }, 20s));
    report_figure("silent member to the waiter's session moved (t = 6 s)",
                  clock::now() - paused_at);
    CHECK(result.wait_for(0s) == std::future_status::timeout);  // still waiting, no error
    resume.now();
  }
  held.release();
  auto first_handle = first.get();
  first_handle.release();
  auto handle = result.get();  // throws if the wait failed
  CHECK(handle.fencing_token() > 0);
}
