// A holder or waiter whose wall clock jumps by an hour, forward or back, while it waits or
// holds (an NTP step, a VM restored from a snapshot) keeps every promise dlock makes: its
// acquire deadline, its grant (not lost, not granted elsewhere), the order of fencing tokens,
// the bound on reporting a loss once its server falls silent, and the minimum-hold window.
// Every bound is counted on the monotonic clock, and the lock servers keep their own time, so
// none may move. The probe (dlock-clock-jump-probe) runs under libfaketime, its monotonic clock
// left alone; this process, whose clock is true, contends.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;

namespace {

const char* const faketime_library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
constexpr auto jump = 1h;
constexpr auto wait_timeout = 1000ms;
constexpr std::chrono::milliseconds lease_length = 2s;  // the URLs' expiry, lease or keepalive
constexpr auto min_hold = 1000ms;
constexpr auto slack = 1s;  // the timing label's allowance on a machine that runs nothing else

long long as_ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

/// The probe process and the file through which its wall clock is moved.
class jumping_probe {
 public:
  explicit jumping_probe(const std::string& url)
      : clock_file_(directory_.path() / "faketime"),
        process_(start(url)) {}

  /// Moves the probe's wall clock to `offset` from the true time, at once: libfaketime reads
  /// the file at every call (FAKETIME_NO_CACHE), and the rename makes the change atomic.
  void set_offset(std::chrono::seconds offset) {
    write_offset(offset);
  }

  std::string ask(const std::string& command, std::chrono::milliseconds timeout = 10s) {
    process_.write_stdin(command + "\n");
    return answer(timeout);
  }

  std::string answer(std::chrono::milliseconds timeout = 10s) {
    auto line = process_.read_line(timeout);
    REQUIRE(line.has_value());
    INFO("probe: " << *line);
    REQUIRE(line->rfind("error", 0) != 0);
    return *line;
  }

 private:
  void write_offset(std::chrono::seconds offset) const {
    const auto next = clock_file_.string() + ".next";
    {
      std::ofstream out(next, std::ios::trunc);
      out << (offset.count() >= 0 ? "+" : "") << offset.count() << "\n";
    }
    std::filesystem::rename(next, clock_file_);
  }

  support::child_process start(const std::string& url) {
    write_offset(0s);
    return support::child_process(
        {DLOCK_CLOCK_JUMP_PROBE_PATH, url},
        {std::string("LD_PRELOAD=") + faketime_library,
         "FAKETIME_TIMESTAMP_FILE=" + clock_file_.string(), "FAKETIME_NO_CACHE=1",
         "FAKETIME_DONT_FAKE_MONOTONIC=1"});
  }

  support::temp_directory directory_;
  std::filesystem::path clock_file_;
  support::child_process process_;
};

std::uint64_t token_in(const std::string& answer) {
  std::istringstream words(answer);
  std::string word;
  std::uint64_t token = 0;
  words >> word >> token;
  REQUIRE(word == "granted");
  return token;
}

/// Where the probe's grant is reported lost once its server falls silent: the server's id for
/// test-servers.sh pause, and the backend's bound (docs/semantics.md#faults-and-partitions).
struct silent_server {
  std::string id;
  std::chrono::milliseconds lost_within;
};

void check_jumps_change_nothing(const std::string& url,
                                const std::optional<silent_server>& server = std::nullopt) {
  if (!std::filesystem::exists(faketime_library)) {
    DLOCK_SKIP("libfaketime is not installed (apt-get install faketime)");
  }
  const std::string name = support::unique_name("jump");
  auto provider = dlock::make_provider(url);
  jumping_probe probe(url);

  SECTION("a waiter's deadline") {
    auto held = provider->create_lock(name).acquire();
    probe.ask("try " + name + " " + std::to_string(wait_timeout.count()));
    probe.set_offset(std::chrono::duration_cast<std::chrono::seconds>(jump));
    std::this_thread::sleep_for(wait_timeout / 3);  // a second jump, back, within the wait
    probe.set_offset(-std::chrono::duration_cast<std::chrono::seconds>(jump));
    std::istringstream refused(probe.answer());
    std::string word;
    long long took = 0;
    refused >> word >> took;
    CHECK(word == "refused");
    CHECK(took >= wait_timeout.count());
    CHECK(took <= (wait_timeout + slack).count());
  }

  SECTION("a holder's grant, and the tokens after it") {
    const auto first = token_in(probe.ask("acquire " + name + " 0"));
    auto contender = provider->create_lock(name);
    // Past the lease's length, through a forward and a backward jump: the probe's extensions
    // and keepalives go on, so it stays the holder and nobody else is granted.
    const auto until = std::chrono::steady_clock::now() + lease_length + lease_length / 4;
    probe.set_offset(std::chrono::duration_cast<std::chrono::seconds>(jump));
    bool jumped_back = false;
    while (std::chrono::steady_clock::now() < until) {
      if (!jumped_back && until - std::chrono::steady_clock::now() < lease_length / 2) {
        probe.set_offset(-std::chrono::duration_cast<std::chrono::seconds>(jump));
        jumped_back = true;
      }
      CHECK_FALSE(contender.try_acquire().has_value());
      CHECK(probe.ask("held") == "held 1");
      std::this_thread::sleep_for(lease_length / 8);
    }
    CHECK(probe.ask("release") == "released");
    auto second = contender.try_acquire(5s);
    REQUIRE(second.has_value());
    CHECK(second->fencing_token() > first);
    second->release();
    // Two hours back from the forward jump: a grant made "earlier" still gets a higher token.
    probe.set_offset(-2 * std::chrono::duration_cast<std::chrono::seconds>(jump));
    CHECK(token_in(probe.ask("acquire " + name + " 0")) > second->fencing_token());
    CHECK(probe.ask("release") == "released");
  }

  SECTION("a holder's loss when its server falls silent, its clock set back") {
    if (!server) return;  // a file lock has no server to fall silent
    token_in(probe.ask("acquire " + name + " 0"));
    // An hour back: a loss counted by the wall clock would come an hour late.
    probe.set_offset(-std::chrono::duration_cast<std::chrono::seconds>(jump));
    support::test_servers({"pause", server->id});
    support::undo_test_servers_fault resume({"resume", server->id});
    const auto paused = std::chrono::steady_clock::now();
    const auto deadline = paused + server->lost_within + slack;
    while (probe.ask("held") == "held 1") {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(lease_length / 40);
    }
    INFO("lost " << as_ms(std::chrono::steady_clock::now() - paused) << " ms into the silence");
    resume.now();
    CHECK(probe.ask("release") == "released");
  }

  SECTION("a minimum-hold window") {
    auto contender = provider->create_lock(name);
    try {
      (void)provider->create_lock(name).with_min_hold(min_hold);
    } catch (const std::invalid_argument& refused) {
      WARN("the backend refuses minimum holds: " << refused.what());
      return;
    }
    const auto asked = std::chrono::steady_clock::now();
    const auto token = token_in(
        probe.ask("acquire " + name + " " + std::to_string(min_hold.count())));
    // Forward, between the grant and the early release: a hold measured by the holder's wall
    // clock would be over already.
    probe.set_offset(std::chrono::duration_cast<std::chrono::seconds>(jump));
    CHECK(probe.ask("release") == "released");
    const auto released = std::chrono::steady_clock::now();
    auto next = contender.try_acquire(min_hold + slack);
    const auto granted = std::chrono::steady_clock::now();
    REQUIRE(next.has_value());
    CHECK(next->fencing_token() > token);
    INFO("granted " << as_ms(granted - asked) << " ms after the probe's acquire was sent");
    CHECK(granted - asked >= min_hold - 100ms);  // the servers' clocks may run a little fast
    CHECK(granted - released <= min_hold + slack);
  }
}

[[maybe_unused]] std::string scoped(const std::string& endpoint, const char* options) {
  return endpoint + "/" + support::unique_name("jump") + "?" + options;
}

}  // namespace

TEST_CASE("a wall-clock jump changes no deadline, grant, token or hold (file)",
          "[clock-jump][clock-jump-file]") {
  support::temp_directory directory;
  check_jumps_change_nothing("file://" + directory.path().string());
}

#ifdef DLOCK_CLOCK_JUMP_REDIS
TEST_CASE("a wall-clock jump changes no deadline, grant, token or hold (redis)",
          "[clock-jump][clock-jump-redis]") {
  check_jumps_change_nothing(support::require_test_server_endpoint("DLOCK_TEST_REDIS") +
                             "?expiry=2s&prefix=" + support::unique_name("jump") + ":",
                             silent_server{"redis", lease_length});
}
#endif

#ifdef DLOCK_CLOCK_JUMP_POSTGRES
TEST_CASE("a wall-clock jump changes no deadline, grant, token or hold (postgres)",
          "[clock-jump][clock-jump-postgres]") {
  check_jumps_change_nothing(support::require_test_server_endpoint("DLOCK_TEST_POSTGRES") +
                             "?keepalive=2s",
                             silent_server{"postgres", lease_length * 3 / 2});
}
#endif

#ifdef DLOCK_CLOCK_JUMP_ZOOKEEPER
TEST_CASE("a wall-clock jump changes no deadline, grant, token or hold (zookeeper)",
          "[clock-jump][clock-jump-zookeeper]") {
  check_jumps_change_nothing(scoped(
      support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER"), "session_timeout=4s"),
      silent_server{"zookeeper", 4s});
}
#endif

#ifdef DLOCK_CLOCK_JUMP_ETCD
TEST_CASE("a wall-clock jump changes no deadline, grant, token or hold (etcd)",
          "[clock-jump][clock-jump-etcd]") {
  check_jumps_change_nothing(
      scoped(support::require_test_server_endpoint("DLOCK_TEST_ETCD"), "lease=2s"),
      silent_server{"etcd", lease_length});
}
#endif
