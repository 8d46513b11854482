// The dlock command end to end against the backend under test: what a cron job relies on.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "backend.hpp"
#include "min_hold_support.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::child_process;
using support::exit_code;
using support::unique_name;
using support::wait_until;

namespace {

// In a session of its own, so dlock has no controlling terminal however the tests are run
// (setsid(1) execs dlock in place: the PID is dlock's).
std::vector<std::string> dlock_command(std::vector<std::string> options, const std::string& name,
                                       std::vector<std::string> command) {
  std::vector<std::string> argv{"/usr/bin/setsid", support::cli_path()};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(backend().url());
  argv.push_back(name);
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

/// The exit code of `process` once it ends (failing the test if it does not within 60 s).
int exit_code_when_done(child_process& process) {
  const auto status = process.wait(60s);
  REQUIRE(status);
  return exit_code(*status);
}

/// Runs dlock to completion and returns its exit code.
int run_dlock(std::vector<std::string> options, const std::string& name,
              std::vector<std::string> command) {
  child_process dlock(dlock_command(std::move(options), name, std::move(command)));
  dlock.close_stdin();
  return exit_code_when_done(dlock);
}

/// A dlock whose command prints "ready <token>" and then holds until its stdin closes.
struct holding_dlock {
  holding_dlock(std::vector<std::string> options, const std::string& name)
      : process(dlock_command(std::move(options), name,
                              {"/bin/sh", "-c", "echo ready $DLOCK_FENCING_TOKEN; cat >/dev/null"})) {
    const auto line = process.read_line(60s);
    REQUIRE(line);
    REQUIRE(line->rfind("ready ", 0) == 0);
    token = std::stoull(line->substr(6));
  }
  int finish() {
    process.close_stdin();
    return exit_code_when_done(process);
  }
  child_process process;
  std::uint64_t token = 0;
};

bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, command, state;
  // A zombie nobody reaps (we are not its parent) has ended all the same.
  return !(stat >> pid_field >> command >> state) || state == "Z";
}

/// The programs `parent`'s children run (their /proc/PID/exe), by pid.
std::vector<std::string> programs_of_children(pid_t parent) {
  const auto task = "/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent);
  std::ifstream children(task + "/children");
  std::vector<std::string> programs;
  for (pid_t child = 0; children >> child;) {
    std::error_code ec;
    programs.push_back(
        std::filesystem::read_symlink("/proc/" + std::to_string(child) + "/exe", ec).string());
  }
  return programs;
}

}  // namespace

TEST_CASE("dlock runs the command under the lock and exits with its status",
          "[contract][deployment][cli]") {
  const auto name = unique_name("cli-status");
  CHECK(run_dlock({}, name, {"/bin/sh", "-c", "exit 0"}) == 0);
  CHECK(run_dlock({}, name, {"/bin/sh", "-c", "exit 7"}) == 7);
  CHECK(run_dlock({}, name, {"/bin/sh", "-c", "kill -TERM $$"}) == 128 + SIGTERM);
}

TEST_CASE("dlock gives the command a fencing token that rises with each run", "[contract][cli]") {
  const auto name = unique_name("cli-token");
  holding_dlock first({}, name);
  REQUIRE(first.finish() == 0);
  holding_dlock second({}, name);
  REQUIRE(second.finish() == 0);
  CHECK(second.token > first.token);
}

TEST_CASE("dlock -n exits with the conflict code while another holds the lock",
          "[contract][cli]") {
  const auto name = unique_name("cli-conflict");
  holding_dlock holder({}, name);
  CHECK(run_dlock({"-n"}, name, {"/bin/sh", "-c", "echo should not run; exit 0"}) == 1);
  CHECK(run_dlock({"-n", "-E", "42"}, name, {"true"}) == 42);
  CHECK(run_dlock({"-w", "0.05"}, name, {"true"}) == 1);
  REQUIRE(holder.finish() == 0);
  CHECK(run_dlock({"-n"}, name, {"true"}) == 0);
}

TEST_CASE("a waiting dlock runs its command once the holder finishes",
          "[contract][deployment][cli]") {
  const auto name = unique_name("cli-wait");
  holding_dlock holder({}, name);
  child_process waiter(dlock_command({"-w", "60"}, name, {"/bin/echo", "second ran"}));
  // It must still be waiting: its command cannot have printed anything.
  CHECK_FALSE(waiter.read_line(200ms));
  REQUIRE(holder.finish() == 0);
  CHECK(waiter.read_line(60s) == std::optional<std::string>("second ran"));
  CHECK(exit_code_when_done(waiter) == 0);
}

TEST_CASE("dlock -s lets readers share and keeps a writer out", "[contract][cli]") {
  const auto name = unique_name("cli-shared");
  holding_dlock reader({"-s"}, name);
  CHECK(run_dlock({"-s", "-n"}, name, {"true"}) == 0);
  CHECK(run_dlock({"--write", "-n"}, name, {"true"}) == 1);
  REQUIRE(reader.finish() == 0);
  CHECK(run_dlock({"--write", "-n"}, name, {"true"}) == 0);
}

TEST_CASE("dlock --semaphore N admits N commands at once", "[contract][cli]") {
  const auto name = unique_name("cli-semaphore");
  holding_dlock first({"--semaphore", "2"}, name);
  holding_dlock second({"--semaphore", "2"}, name);
  CHECK(run_dlock({"--semaphore", "2", "-n"}, name, {"true"}) == 1);
  REQUIRE(first.finish() == 0);
  CHECK(run_dlock({"--semaphore", "2", "-n"}, name, {"true"}) == 0);
  REQUIRE(second.finish() == 0);
}

TEST_CASE("dlock forwards SIGTERM to the command", "[contract][cli]") {
  const auto name = unique_name("cli-forward");
  child_process dlock(dlock_command(
      {}, name,
      {"/bin/sh", "-c", "trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.01; done"}));
  REQUIRE(dlock.read_line(60s) == std::optional<std::string>("ready"));
  dlock.signal(SIGTERM);
  CHECK(dlock.read_line(10s) == std::optional<std::string>("got TERM"));
  CHECK(exit_code_when_done(dlock) == 3);
  CHECK(run_dlock({"-n"}, name, {"true"}) == 0);
}

TEST_CASE("a signal to a waiting dlock withdraws its request", "[contract][cli]") {
  const auto name = unique_name("cli-interrupt");
  holding_dlock holder({}, name);
  child_process waiter(dlock_command({}, name, {"/bin/echo", "should not run"}));
  CHECK_FALSE(waiter.read_line(100ms));
  waiter.signal(SIGINT);
  CHECK(exit_code_when_done(waiter) == 128 + SIGINT);
  CHECK(waiter.read_all(1s).empty());
  REQUIRE(holder.finish() == 0);
  CHECK(run_dlock({"-n"}, name, {"true"}) == 0);
}

TEST_CASE("a lost lock ends the command's process group and dlock exits 75",
          "[contract][cli][fault]") {
  const auto name = unique_name("cli-lost");
  child_process dlock(dlock_command(
      {"--kill-grace", "30"}, name,
      {"/bin/sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.01; done"}));
  REQUIRE(dlock.read_line(60s) == std::optional<std::string>("ready"));
  backend().break_lock(name);
  CHECK(dlock.read_line(60s) == std::optional<std::string>("got TERM"));
  CHECK(exit_code_when_done(dlock) == 75);
}

TEST_CASE("dlock --max-hold ends a command that holds the lock too long, exit 75",
          "[contract][cli][max_hold]") {
  const auto name = unique_name("cli-max-hold");
  child_process dlock(dlock_command(
      {"--max-hold", "0.2"}, name,
      {"/bin/sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.01; done"}));
  REQUIRE(dlock.read_line(60s) == std::optional<std::string>("ready"));
  CHECK(dlock.read_line(60s) == std::optional<std::string>("got TERM"));
  CHECK(exit_code_when_done(dlock) == 75);
  CHECK(run_dlock({"-n"}, name, {"true"}) == 0);
}

TEST_CASE("dlock --min-hold keeps the lock past a quick command, so a run within the hold is "
          "refused; a backend that cannot keep it is a usage error",
          "[contract][cli][min_hold]") {
  const auto name = unique_name("cli-min-hold");
  if (!contract::keeps_min_hold(*backend().make_provider())) {
    CHECK(run_dlock({"--min-hold", "2"}, name, {"true"}) == 64);
    return;
  }
  const auto asked = std::chrono::steady_clock::now();
  CHECK(run_dlock({"--min-hold", "2"}, name, {"true"}) == 0);
  if (std::chrono::steady_clock::now() - asked < contract::min_hold / 2) {
    CHECK(run_dlock({"-n"}, name, {"/bin/sh", "-c", "echo should not run; exit 0"}) == 1);
  }
  CHECK(run_dlock({"-w", "30"}, name, {"true"}) == 0);
  CHECK(std::chrono::steady_clock::now() - asked >= contract::min_hold - contract::clock_slack);
}

TEST_CASE("a command that ignores SIGTERM after a loss is killed after the grace period",
          "[contract][cli][fault]") {
  const auto name = unique_name("cli-grace");
  child_process dlock(dlock_command({"--kill-grace", "0.1"}, name,
                                    {"/bin/sh", "-c", "trap '' TERM; echo ready; exec sleep 600"}));
  REQUIRE(dlock.read_line(60s) == std::optional<std::string>("ready"));
  backend().break_lock(name);
  CHECK(exit_code_when_done(dlock) == 75);
}

TEST_CASE("the command and its whole group die with a dlock killed by SIGKILL",
          "[contract][cli][fault]") {
  const auto name = unique_name("cli-orphan");
  child_process dlock(
      dlock_command({}, name, {"/bin/sh", "-c", "sleep 600 & echo $$ $!; wait"}));
  const auto line = dlock.read_line(60s);
  REQUIRE(line);
  pid_t command = 0;
  pid_t grandchild = 0;
  REQUIRE(std::sscanf(line->c_str(), "%d %d", &command, &grandchild) == 2);
  dlock.signal(SIGKILL);
  REQUIRE(dlock.wait(10s));
  CHECK(wait_until([&] { return process_gone(command) && process_gone(grandchild); }, 10s));
}

TEST_CASE("the watchdog is the small dlock-watchdog program, not a copy of dlock",
          "[contract][cli]") {
  // A copy (fork) of dlock works too, but costs every run its page tables: the installation
  // (and the build tree) must have the helper beside the plugins.
  holding_dlock holder({}, unique_name("cli-watchdog"));
  const auto programs = programs_of_children(holder.process.pid());
  CHECK(std::count_if(programs.begin(), programs.end(), [](const std::string& program) {
          return program.ends_with("/dlock-watchdog");
        }) == 1);
  CHECK(holder.finish() == 0);
}

TEST_CASE("after a loss, group members that ignore SIGTERM are killed after the grace period",
          "[contract][cli][fault]") {
  const auto name = unique_name("cli-straggler");
  child_process dlock(dlock_command(
      {"--kill-grace", "0.2"}, name,
      {"/bin/sh", "-c", "sh -c 'trap \"\" TERM; echo $$; exec sleep 600' & "
                        "echo leader; while :; do sleep 0.01; done"}));
  // The straggler prints its PID (which `exec sleep` keeps), the leader a word, in any order.
  pid_t straggler = 0;
  for (int i = 0; i < 2; ++i) {
    const auto line = dlock.read_line(60s);
    REQUIRE(line);
    if (*line != "leader") straggler = std::stoi(*line);
  }
  REQUIRE(straggler > 0);
  backend().break_lock(name);
  CHECK(exit_code_when_done(dlock) == 75);
  CHECK(wait_until([&] { return process_gone(straggler); }, 10s));
}

TEST_CASE("a stopped command is waited for, not lost track of", "[contract][cli]") {
  const auto name = unique_name("cli-stopped");
  child_process dlock(dlock_command(
      {}, name, {"/bin/sh", "-c", "echo $$; kill -STOP $$; echo resumed; exit 4"}));
  const auto line = dlock.read_line(60s);
  REQUIRE(line);
  const pid_t command = std::stoi(*line);
  CHECK_FALSE(dlock.read_line(100ms));
  ::kill(command, SIGCONT);
  CHECK(dlock.read_line(10s) == std::optional<std::string>("resumed"));
  CHECK(exit_code_when_done(dlock) == 4);
}

TEST_CASE("dlock started with SIGCHLD ignored still reports the command's status",
          "[contract][cli]") {
  const auto name = unique_name("cli-sigchld");
  auto argv = dlock_command({}, name, {"/bin/sh", "-c", "exit 5"});
  std::string script = "trap '' CHLD; exec";
  for (const auto& word : argv) script += " '" + word + "'";
  child_process dlock({"/bin/sh", "-c", script});
  dlock.close_stdin();
  CHECK(exit_code_when_done(dlock) == 5);
}

TEST_CASE("dlock takes the URL from DLOCK_URL when none is given", "[contract][cli]") {
  const auto name = unique_name("cli-env");
  child_process dlock({support::cli_path(), name, "--", "/bin/echo", "ran"},
                      {"DLOCK_URL=" + backend().url()});
  CHECK(dlock.read_line(60s) == std::optional<std::string>("ran"));
  CHECK(exit_code_when_done(dlock) == 0);
}

TEST_CASE("dlock check exits 0 while a token's grant holds the lock, 1 when it does not",
          "[contract][cli][is_current]") {
  const auto name = unique_name("cli-check");
  const auto check = [&](const std::string& token) {
    child_process dlock({"/usr/bin/setsid", support::cli_path(), "check", backend().url(), name,
                         token});
    dlock.close_stdin();
    return exit_code_when_done(dlock);
  };
  holding_dlock holder({}, name);
  CHECK(check(std::to_string(holder.token)) == 0);
  CHECK(check(std::to_string(holder.token + 1000)) == 1);
  CHECK(check("not-a-token") == 64);
  REQUIRE(holder.finish() == 0);
  CHECK(check(std::to_string(holder.token)) == 1);
}
