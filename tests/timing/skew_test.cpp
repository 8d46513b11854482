// Two hosts whose wall clocks disagree by two seconds run the same job at "the same" scheduled
// moment, as cron on each would, under one lock with a minimum hold (docs/recipes.md): the job
// runs once per window, since the hold is counted by the lock server's clock. Without the hold
// it runs twice per window, which shows the skew is real. Each "host" is a dlock-skew-probe
// process under libfaketime (Debian's faketime), its monotonic clock left alone.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

constexpr auto window = 4s;
constexpr auto skew = 2s;   // the late host's clock is this far behind
constexpr auto hold = 3s;   // longer than the skew, shorter than the window
constexpr int windows = 3;
const char* const faketime_library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Two hosts running `windows` windows of one lock with a minimum hold of `with_hold`, started
/// at construction; `runs()` waits for them and counts the runs each window saw, by index.
/// The held and the unheld pair run at once, on locks of their own, to halve the test's time.
class host_pair {
 public:
  host_pair(const std::string& url, std::chrono::milliseconds with_hold)
      : log_((logs_.path() / "runs.log").string()),
        on_time_(probe(url, with_hold, "+0", "on-time")),
        late_(probe(url, with_hold, "-" + std::to_string(std::chrono::seconds(skew).count()),
                    "late")) {}

  std::map<long long, int> runs() {
    const auto deadline = window * (windows + 3) + skew;
    REQUIRE(on_time_.wait(std::chrono::duration_cast<std::chrono::milliseconds>(deadline)) == 0);
    REQUIRE(late_.wait(std::chrono::duration_cast<std::chrono::milliseconds>(deadline)) == 0);
    std::map<long long, int> runs;
    std::ifstream in(log_);
    long long index = 0;
    std::string who, token;
    while (in >> index >> who >> token) ++runs[index];
    return runs;
  }

 private:
  support::child_process probe(const std::string& url, std::chrono::milliseconds with_hold,
                               const std::string& offset, const std::string& who) {
    return support::child_process(
        {"/usr/bin/env", std::string("LD_PRELOAD=") + faketime_library, "FAKETIME=" + offset,
         "FAKETIME_DONT_FAKE_MONOTONIC=1", DLOCK_SKEW_PROBE_PATH, url, name_,
         std::to_string(std::chrono::milliseconds(window).count()), std::to_string(first_),
         std::to_string(windows), std::to_string(with_hold.count()), log_, who});
  }

  support::temp_directory logs_;
  std::string log_;
  std::string name_ = support::unique_name("skew");
  // Two windows ahead, so both hosts are up before the first; the late host reaches each
  // window `skew` after the other.
  long long first_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()) /
                         window +
                     2;
  support::child_process on_time_;
  support::child_process late_;
};

void check_once_per_window(const std::string& url) {
  if (!std::filesystem::exists(faketime_library)) {
    DLOCK_SKIP("libfaketime is not installed (apt-get install faketime)");
  }
  try {
    (void)dlock::make_provider(url)->create_lock("probe").with_min_hold(hold);
  } catch (const std::invalid_argument& refused) {
    DLOCK_SKIP("the backend refuses minimum holds: " << refused.what());
  }
  host_pair held(url, std::chrono::duration_cast<std::chrono::milliseconds>(hold));
  // The same without a hold: the late host finds the job done and the lock free.
  host_pair unheld(url, 0ms);
  const auto held_runs = held.runs();
  CHECK(held_runs.size() == windows);
  for (const auto& [index, runs] : held_runs) CHECK(runs == 1);
  const auto unheld_runs = unheld.runs();
  CHECK(unheld_runs.size() == windows);
  for (const auto& [index, runs] : unheld_runs) CHECK(runs == 2);
}

}  // namespace

TEST_CASE("a job under a minimum hold runs once per window on hosts whose clocks disagree (file)",
          "[skew][skew-file]") {
  support::temp_directory directory;
  check_once_per_window("file://" + directory.path().string());
}

#ifdef DLOCK_SKEW_REDIS
TEST_CASE("a job under a minimum hold runs once per window on hosts whose clocks disagree (redis)",
          "[skew][skew-redis]") {
  check_once_per_window(support::require_test_server_endpoint("DLOCK_TEST_REDIS") +
                        "?prefix=" + support::unique_name("skew") + ":");
}
#endif

#ifdef DLOCK_SKEW_ETCD
TEST_CASE("a job under a minimum hold runs once per window on hosts whose clocks disagree (etcd)",
          "[skew][skew-etcd]") {
  check_once_per_window(support::require_test_server_endpoint("DLOCK_TEST_ETCD"));
}
#endif

#ifdef DLOCK_SKEW_ZOOKEEPER
TEST_CASE("a job under a minimum hold runs once per window on hosts whose clocks disagree "
          "(zookeeper)",
          "[skew][skew-zookeeper]") {
  check_once_per_window(support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER") + "/" +
                        support::unique_name("skew"));
}
#endif
