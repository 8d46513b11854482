// A waiting acquire whose session expires, in the two ways a client hears of that: its nodes
// deleted while it is connected, or the server's word when it reconnects. A lock's waiter
// watches its own node for its grant to adopt (zookeeper/src/held_watch.hpp); that watch acts
// only on a deletion while the acquire waits, which is safe because the acquire queues again
// in the new session, dropping the watch, before anything grants it. These tests hold the
// waiter's thread so that the expiry comes in the worst order for it, and check that the grant
// is a new node, watched in the new session. One restarts the shared server, so they run
// alone (RUN_SERIAL) with the fault tests.
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>

#include <dlock/dlock.hpp>

#include "fault_support.hpp"
#include "min_hold.hpp"
#include "support.hpp"
#include "test_servers.hpp"
#include "zookeeper_client.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;
using namespace zookeeper_fault;

namespace {

/// Holds a provider's io thread until resumed (at the latest on destruction): its client
/// neither pings nor reads meanwhile, so its session expires after the session timeout.
class held_io_thread {
 public:
  explicit held_io_thread(dlock::provider& provider) {
    auto running = std::make_shared<std::atomic<bool>>(false);
    boost::asio::post(provider.get_executor(),
                      [running, resumed = resume_.get_future().share()] {
                        *running = true;
                        resumed.wait();
                      });
    held_ = wait_until([&] { return running->load(); }, 10s);
  }
  ~held_io_thread() { resume(); }
  held_io_thread(const held_io_thread&) = delete;
  held_io_thread& operator=(const held_io_thread&) = delete;

  bool held() const { return held_; }
  void resume() {
    if (!std::exchange(resumed_, true)) resume_.set_value();
  }

 private:
  std::promise<void> resume_;
  bool resumed_ = false;
  bool held_ = false;
};

struct waiting_node {
  std::string path;  // "" when none was found
  std::int64_t czxid = 0;
};

/// The queue node of the acquire with a minimum hold waiting under `parent`, once it watches
/// that node (nobody else does); none if that does not happen in time.
waiting_node watched_waiting_node(const std::string& parent) {
  support::zookeeper_session observer(support::zookeeper_hosts(standalone_url()));
  waiting_node found;
  const bool queued = wait_until(
      [&] {
        for (const std::string& child : observer.children(parent)) {
          if (dlock::zookeeper::detail::takes_min_hold(child)) found.path = parent + "/" + child;
        }
        return !found.path.empty();
      },
      10s);
  const int port = support::endpoint_hosts(standalone_url()).at(0).port;
  const auto watched = [&] {
    const auto watches = support::zookeeper_four_letter_word(port, "wchp", 1s);
    return watches && watches->find(found.path) != std::string::npos;
  };
  if (!queued || !wait_until(watched, 10s)) return {};
  found.czxid = observer.czxid(found.path);
  return found;
}

/// Whether the server deletes `node` (its session expired) within 30 s.
bool deleted_in_time(const std::string& node) {
  support::zookeeper_session observer(support::zookeeper_hosts(standalone_url()));
  return wait_until([&] { return observer.czxid(node) == -1; }, 30s);
}

/// A provider holding "job" under a fresh base, and another's acquire with a minimum hold
/// queued behind it, watching its own node.
struct waiter_behind_holder {
  waiter_behind_holder(const std::string& base_name, std::chrono::milliseconds holder_session)
      : base("/" + unique_name(base_name)),
        holder(make_zookeeper(standalone_url(), base, holder_session)),
        waiter(make_zookeeper(standalone_url(), base, 4s)),
        parent(holder->lock_node_path("job")),
        held(holder->create_lock("job").acquire(10s)),
        granted(waiter->create_lock("job").with_min_hold(300ms).async_acquire(
            60s, {}, boost::asio::use_future)),
        queued(watched_waiting_node(parent)) {}

  /// Checks the grant that follows the expiry of the session `queued` waited in: a new node
  /// with its hold, not lost, and lost once that node is deleted (what only the watch on it
  /// reports while the new session lives).
  void check_granted_anew() {
    REQUIRE(granted.wait_for(30s) == std::future_status::ready);
    dlock::lock_handle handle = granted.get();
    CHECK_FALSE(handle.lost());
    const auto token = static_cast<std::int64_t>(handle.fencing_token());
    CHECK(token > queued.czxid);
    support::zookeeper_session observer(support::zookeeper_hosts(standalone_url()));
    std::string node;
    for (const std::string& child : observer.children(parent)) {
      if (observer.czxid(parent + "/" + child) == token) node = parent + "/" + child;
    }
    REQUIRE_FALSE(node.empty());
    CHECK(observer.czxid(parent + "/min-hold-" + std::to_string(token)) != -1);
    CHECK_FALSE(handle.lost());
    REQUIRE(observer.remove(node) == ZOK);
    CHECK(wait_until([&] { return handle.lost(); }, 10s));
  }

  std::string base;
  std::shared_ptr<dlock::zookeeper::provider> holder;
  std::shared_ptr<dlock::zookeeper::provider> waiter;
  std::string parent;
  dlock::lock_handle held;
  std::future<dlock::lock_handle> granted;
  waiting_node queued;
};

}  // namespace

TEST_CASE("a waiter with a minimum hold whose session expires while connected is granted a "
          "new node in the new session, watched there",
          "[zookeeper][fault][min_hold]") {
  waiter_behind_holder queue("dlock-expiry-connected", 4s);
  REQUIRE_FALSE(queue.queued.path.empty());
  {
    held_io_thread stall(*queue.waiter);
    REQUIRE(stall.held());
    // The holder's deletion reaches the waiter's socket first; then the server expires the
    // waiter's session, deleting its node, and closes the connection. The waiter's watch on
    // its node hears of that as the deletion or, on reconnecting, as the expiry.
    queue.held.release();
    REQUIRE(deleted_in_time(queue.queued.path));
  }
  queue.check_granted_anew();
}

TEST_CASE("a waiter with a minimum hold whose session expires while it is cut off (the server "
          "restarted) is granted a new node in the new session, watched there",
          "[zookeeper][fault][min_hold]") {
  waiter_behind_holder queue("dlock-expiry-cut-off", 20s);  // the holder outlives the restart
  REQUIRE_FALSE(queue.queued.path.empty());
  {
    held_io_thread stall(*queue.waiter);
    REQUIRE(stall.held());
    // The restarted server keeps the sessions but not their connections: the waiter, held,
    // does not come back, and its session expires unheard, deleting its node. The holder's
    // release meanwhile tells it nothing. It learns of the expiry only on reconnecting, as
    // every watch of its (its own node's included) hears.
    support::test_servers({"restart", "zookeeper"});
    // The release goes out once the holder is back in its session (within release_timeout).
    REQUIRE(wait_until([&] { return queue.holder->health().connected; }, 20s));
    queue.held.release();
    REQUIRE(deleted_in_time(queue.queued.path));
  }
  queue.check_granted_anew();
}
