// What only dlock::etcd has: concurrency.Mutex's key layout, interoperability with
// `etcdctl lock`, the provider's lease, and its URL. The contract suite covers the rest.
#include <signal.h>

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <sstream>

#include <dlock/dlock.hpp>

#include "etcd_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using support::unique_name;
using support::wait_until;

namespace {

std::string standalone_url() { return support::require_test_server_endpoint("DLOCK_TEST_ETCD"); }
std::string endpoints() { return support::etcd_endpoints(standalone_url()); }

std::shared_ptr<dlock::etcd::provider> make_etcd(const std::string& prefix) {
  return std::make_shared<dlock::etcd::provider>(
      dlock::etcd::options{.endpoints = endpoints(), .prefix = prefix, .lease_ttl = 3s});
}

/// `etcdctl lock <name>`: prints its key once it holds the lock, holds it until SIGINT.
/// `etcdctl elect <name> <proposal>`: prints its key and proposal once it leads, leads until
/// SIGINT.
struct etcdctl_lock {
  explicit etcdctl_lock(const std::string& name)
      : process({"/usr/bin/etcdctl", "--endpoints=" + endpoints(), "lock", name}) {}
  etcdctl_lock(const std::string& name, const std::string& proposal)
      : process({"/usr/bin/etcdctl", "--endpoints=" + endpoints(), "elect", name, proposal}) {}
  ~etcdctl_lock() {
    process.signal(SIGINT);  // etcdctl unlocks, then exits
    (void)process.wait(10s);
  }
  support::child_process process;
};

// Whether etcd knows the lease `hex` now (etcdctl pads its ids to 16 digits, keys do not).
bool lease_exists(const std::string& hex) {
  std::istringstream lines(support::etcdctl(endpoints(), {"lease", "list"}));
  std::string line;
  std::getline(lines, line);  // "found N leases"
  while (std::getline(lines, line)) {
    if (std::stoull(line, nullptr, 16) == std::stoull(hex, nullptr, 16)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a lock's key is concurrency.Mutex's: the queue, then the provider's lease id in hex",
          "[etcd]") {
  const std::string prefix = unique_name("layout") + "/";
  auto etcd = make_etcd(prefix);
  CHECK(etcd->lock_key_prefix("job") == prefix + "job/");
  CHECK(etcd->lock_key_prefix("a/b c") == prefix + "a%2Fb%20c/");
  auto held = etcd->create_lock("job").acquire(10s);
  const auto keys = support::etcd_keys(endpoints(), prefix);
  REQUIRE(keys.size() == 1);
  REQUIRE(keys[0].rfind(prefix + "job/", 0) == 0);
  const std::string lease_hex = keys[0].substr(prefix.size() + 4);
  CHECK(lease_exists(lease_hex));
  // The fencing token is the key's create revision.
  const std::string json = support::etcdctl(endpoints(), {"get", keys[0], "-w", "json"});
  CHECK(json.find("\"create_revision\":" + std::to_string(held.fencing_token())) !=
        std::string::npos);
}

TEST_CASE("each primitive of a name queues under a prefix of its own", "[etcd]") {
  const std::string prefix = unique_name("kinds") + "/";
  auto etcd = make_etcd(prefix);
  auto lock = etcd->create_lock("a").acquire(10s);
  auto read = etcd->create_reader_writer_lock("a").acquire_read(10s);
  auto slot = etcd->create_semaphore("a", 2).acquire(10s);
  auto second_slot = etcd->create_semaphore("a", 2).acquire(10s);
  const auto keys = support::etcd_keys(endpoints(), prefix);
  REQUIRE(keys.size() == 4);
  CHECK(keys[0].rfind(prefix + ".rw/a/", 0) == 0);
  CHECK(keys[1].rfind(prefix + ".semaphore/a/", 0) == 0);
  // One provider's second key in one queue carries a suffix.
  CHECK(keys[2] == keys[1] + "_1");
  CHECK(keys[3].rfind(prefix + "a/", 0) == 0);
}

TEST_CASE("etcdctl lock waits while dlock holds the lock, and takes it once dlock releases",
          "[etcd][interop]") {
  const std::string prefix = unique_name("interop") + "/";
  auto etcd = make_etcd(prefix);
  auto held = etcd->create_lock("job").acquire(10s);
  etcdctl_lock other(prefix + "job");
  // etcdctl queued its key behind ours...
  REQUIRE(wait_until([&] { return support::etcd_keys(endpoints(), prefix).size() == 2; }));
  // ... and has not reported the lock as its own.
  CHECK_FALSE(other.process.read_line(300ms));
  held.release();
  const auto line = other.process.read_line(10s);
  REQUIRE(line);
  CHECK(line->rfind(prefix + "job/", 0) == 0);
}

TEST_CASE("dlock waits while etcdctl lock holds the lock, and takes it once etcdctl unlocks",
          "[etcd][interop]") {
  const std::string prefix = unique_name("interop") + "/";
  auto etcd = make_etcd(prefix);
  auto other = std::make_unique<etcdctl_lock>(prefix + "job");
  REQUIRE(other->process.read_line(10s));
  auto lock = etcd->create_lock("job");
  CHECK_FALSE(lock.try_acquire());
  auto waiting = lock.async_acquire(20s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return support::etcd_keys(endpoints(), prefix).size() == 2; }));
  CHECK(waiting.wait_for(0s) == std::future_status::timeout);
  other.reset();  // SIGINT: etcdctl deletes its key
  auto held = waiting.get();
  CHECK(held);
}

TEST_CASE("inspect reads the owner from the key's value, the lease's time left, and sees "
          "etcdctl's holder and dlock's waiter in queue order",
          "[etcd][interop][inspect]") {
  const std::string prefix = unique_name("inspect") + "/";
  auto etcd = make_etcd(prefix);
  auto observer = make_etcd(prefix);
  const std::string queue = etcd->lock_key_prefix("a/b c");  // the name escaped: a%2Fb%20c/
  auto other = std::make_unique<etcdctl_lock>(queue.substr(0, queue.size() - 1));
  REQUIRE(other->process.read_line(10s));
  auto lock = etcd->create_lock("a/b c").with_owner("queued job");
  auto waiting = lock.async_acquire(20s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return observer->inspect("a/b c").waiters.size() == 1; }));

  auto found = observer->inspect("a/b c");
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().owner.empty());  // etcdctl writes no owner
  CHECK_FALSE(found.holders.front().since);    // etcd keeps no time per key
  const auto& waiter = found.waiters.front();
  CHECK(waiter.owner == "queued job");
  // Queue order is create-revision order; the waiter's key is younger.
  CHECK(waiter.fencing_token > found.holders.front().fencing_token);
  REQUIRE(waiter.lease_left);
  CHECK(*waiter.lease_left > 0s);
  CHECK(*waiter.lease_left <= 3s);

  const auto listed = observer->list_locks("a/");
  REQUIRE(listed.size() == 1);
  CHECK(listed.front().name == "a/b c");

  other.reset();  // etcdctl unlocks: the waiter holds, with its key's create revision
  auto held = waiting.get();
  found = observer->inspect("a/b c");
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().fencing_token == held.fencing_token());
  // The owner is the value of dlock's key, which etcdctl lock ignores.
  const auto keys = support::etcd_keys(endpoints(), prefix);
  REQUIRE(keys.size() == 1);
  CHECK(support::etcdctl(endpoints(), {"get", keys[0], "--print-value-only"}) ==
        "queued job\n");
}

TEST_CASE("etcdctl elect and dlock take part in one election: each sees the other lead, in "
          "terms of create revisions",
          "[etcd][interop][election]") {
  const std::string prefix = unique_name("elect") + "/";
  auto etcd = make_etcd(prefix);
  auto election = etcd->create_election("primary");
  const std::string queue = prefix + ".election/primary";
  auto other = std::make_unique<etcdctl_lock>(queue, "from-etcdctl");
  const auto key = other->process.read_line(10s);
  REQUIRE(key);
  CHECK(other->process.read_line(10s) == "from-etcdctl");
  const auto leader = election.leader();
  REQUIRE(leader);
  CHECK(leader->value == "from-etcdctl");
  const std::string fields = support::etcdctl(endpoints(), {"get", *key, "-w", "fields"});
  const std::size_t created = fields.find("\"CreateRevision\" : ");
  REQUIRE(created != std::string::npos);
  CHECK(leader->term == std::stoull(fields.substr(created + 19)));
  CHECK_FALSE(election.try_campaign("from-dlock"));
  auto campaign = election.with_value("from-dlock").async_campaign(20s, {}, boost::asio::use_future);
  REQUIRE(wait_until([&] { return support::etcd_keys(endpoints(), queue + "/").size() == 2; }));
  other.reset();  // SIGINT: etcdctl resigns
  auto leading = campaign.get();
  CHECK(leading.term() > leader->term);
  // What concurrency.Election reads as the leader (the oldest key), as etcdctl elect -l does.
  const auto observed = [&] {
    return support::etcdctl(endpoints(), {"get", "--prefix", queue + "/", "--sort-by=CREATE",
                                          "--order=ASCEND", "--limit=1", "--print-value-only"});
  };
  CHECK(observed() == "from-dlock\n");
  leading.proclaim("proclaimed");
  CHECK(observed() == "proclaimed\n");
  CHECK(election.leader() == dlock::leader_info{"proclaimed", leading.term()});
}

TEST_CASE("revoking the provider's lease marks its locks lost, and the next acquire gets a new "
          "lease",
          "[etcd][lost]") {
  const std::string prefix = unique_name("revoke") + "/";
  auto etcd = make_etcd(prefix);
  auto held = etcd->create_lock("job").acquire(10s);
  const auto keys = support::etcd_keys(endpoints(), prefix);
  REQUIRE(keys.size() == 1);
  const std::string lease_hex = keys[0].substr(prefix.size() + 4);
  support::etcdctl(endpoints(), {"lease", "revoke", lease_hex});
  REQUIRE(wait_until([&] { return held.lost(); }, 10s));
  auto again = etcd->create_lock("job").acquire(10s);
  const auto now = support::etcd_keys(endpoints(), prefix);
  REQUIRE(now.size() == 1);
  CHECK(now[0] != keys[0]);
  CHECK(again.fencing_token() > held.fencing_token());
}

TEST_CASE("the provider revokes its lease when it goes", "[etcd]") {
  std::string lease_hex;
  {
    const std::string prefix = unique_name("goes") + "/";
    auto etcd = make_etcd(prefix);
    auto held = etcd->create_lock("job").acquire(10s);
    lease_hex = support::etcd_keys(endpoints(), prefix).at(0).substr(prefix.size() + 4);
    held.release();
  }
  // Revoked before the provider's destructor returned, not later on its thread (the release
  // posted a handler that held the backend): looked at once, well within the 3 s TTL after
  // which the lease would be gone without a revoke.
  CHECK_FALSE(lease_exists(lease_hex));
}

TEST_CASE("etcd URLs: the path is the key prefix, options are checked", "[etcd][url]") {
  const std::string prefix = unique_name("url");
  auto etcd = dlock::make_provider(standalone_url() + "/" + prefix + "?lease=5s");
  auto held = etcd->create_lock("job").acquire(10s);
  CHECK(support::etcd_keys(endpoints(), prefix + "/job/").size() == 1);
  REQUIRE_THROWS_WITH(dlock::make_provider(standalone_url() + "/x?lease=1500ms"),
                      Catch::Contains("lease_ttl"));
  REQUIRE_THROWS_WITH(dlock::make_provider(standalone_url() + "/x?leases=5s"),
                      Catch::Contains("leases"));
  REQUIRE_THROWS_WITH(dlock::make_provider("etcd:///x"), Catch::Contains("host"));
  REQUIRE_THROWS_WITH(dlock::make_provider(standalone_url() + "/x?ca=/nonexistent/ca.pem"),
                      Catch::Contains("/nonexistent/ca.pem"));
  REQUIRE_THROWS_AS(dlock::make_provider("etcd://127.0.0.1:1/x?connect_timeout=500ms"),
                    dlock::connection_error);
}

TEST_CASE("a lock released before its minimum hold ends stays held, for etcdctl lock too, "
          "until its lease of the time left runs out at etcd, while the holder's provider lives "
          "on and keeps its own lease",
          "[etcd][min_hold][interop]") {
  const std::string prefix = unique_name("hold-released") + "/";
  auto holder = make_etcd(prefix);
  const auto asked = std::chrono::steady_clock::now();
  auto held = holder->create_lock("job").with_min_hold(2s).acquire(10s);
  held.release();
  // etcdctl lock, which knows nothing of holds, queues behind the key left in place...
  etcdctl_lock other(prefix + "job");
  REQUIRE(wait_until([&] { return support::etcd_keys(endpoints(), prefix).size() == 2; }));
  // ... and takes the lock once that key's lease runs out, not before grant + 2 s. The lease of
  // the time left is whole seconds, rounded up; etcd may raise a short TTL to its minimum and
  // looks for expired leases every 500 ms. On the provider's lease, which the provider still
  // keeps alive, the key would stay until the provider goes.
  const auto line = other.process.read_line(30s);
  const auto took = std::chrono::steady_clock::now() - asked;
  REQUIRE(line);
  CHECK(line->rfind(prefix + "job/", 0) == 0);
  CHECK(took >= 2s - 20ms);
  CHECK(took < 2s + 4s);
  CHECK(holder->health().connected);
}

TEST_CASE("a minimum hold longer than the provider's lease outlives its holder's SIGKILL until "
          "grant + min_hold, on a lease of its own",
          "[etcd][min_hold][multiprocess]") {
  const std::string prefix = unique_name("hold-killed");
  const auto asked = std::chrono::steady_clock::now();
  support::child_process holder({support::helper_path(), "hold",
                                 standalone_url() + "/" + prefix + "?lease=3s&min_hold=6s", "job",
                                 "lock"});
  auto line = holder.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("acquired ", 0) == 0);
  // The key moved at grant from its provider's lease (whose id it bears) to the hold's own.
  const auto keys = support::etcd_keys(endpoints(), prefix + "/");
  REQUIRE(keys.size() == 1);
  const std::string lease_hex = keys[0].substr(prefix.size() + 5);
  const std::string json = support::etcdctl(endpoints(), {"get", keys[0], "-w", "json"});
  CHECK(json.find("\"lease\":" + std::to_string(std::stoll(lease_hex, nullptr, 16))) ==
        std::string::npos);
  holder.signal(SIGKILL);
  REQUIRE(holder.wait());
  // Its provider's lease (3 s) runs out well before grant + 6 s; the hold's keeps the key.
  auto etcd = make_etcd(prefix + "/");
  auto next = etcd->create_lock("job").acquire(30s);
  CHECK(std::chrono::steady_clock::now() - asked >= 6s - 20ms);
  CHECK(next.fencing_token() > std::stoull(line->substr(9)));
}

TEST_CASE("a provider that released a lock before its minimum hold ended waits for the hold "
          "too, queued under another key of its lease",
          "[etcd][min_hold]") {
  const std::string prefix = unique_name("hold-again") + "/";
  auto etcd = make_etcd(prefix);
  const auto asked = std::chrono::steady_clock::now();
  auto held = etcd->create_lock("job").with_min_hold(2s).acquire(10s);
  const std::uint64_t token = held.fencing_token();
  held.release();
  // Its key's name is still at etcd, held over: taken over or deleted, it would end the hold.
  auto again = etcd->create_lock("job").acquire(30s);
  CHECK(std::chrono::steady_clock::now() - asked >= 2s - 20ms);
  CHECK(again.fencing_token() > token);
  const auto keys = support::etcd_keys(endpoints(), prefix);
  REQUIRE(keys.size() == 1);
  CHECK(keys[0].substr(prefix.size() + 4).find('_') != std::string::npos);
}

TEST_CASE("once its minimum hold is over, a key held on a lease of its own goes back to its "
          "provider's lease, so that a dead holder frees it as soon as without a hold",
          "[etcd][min_hold]") {
  const std::string prefix = unique_name("hold-over") + "/";
  auto etcd = make_etcd(prefix);  // a lease of 3 s: a hold of 4 s needs one of its own
  auto held = etcd->create_lock("job").with_min_hold(4s).acquire(10s);
  const auto keys = support::etcd_keys(endpoints(), prefix);
  REQUIRE(keys.size() == 1);
  const std::string provider_lease =
      "\"lease\":" + std::to_string(std::stoll(keys[0].substr(prefix.size() + 4), nullptr, 16));
  const auto on_provider_lease = [&] {
    return support::etcdctl(endpoints(), {"get", keys[0], "-w", "json"}).find(provider_lease) !=
           std::string::npos;
  };
  CHECK_FALSE(on_provider_lease());
  CHECK(wait_until(on_provider_lease, 15s));
  CHECK_FALSE(held.lost());
  const std::uint64_t token = held.fencing_token();
  held.release();
  // Past the hold, a release deletes the key.
  CHECK(support::etcd_keys(endpoints(), prefix).empty());
  auto next = etcd->create_lock("job").try_acquire();
  REQUIRE(next);
  CHECK(next->fencing_token() > token);
}
