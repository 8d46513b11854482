// dlock never runs a command it could not guard: when no watchdog process can be started
// (neither the dlock-watchdog helper nor the fork that stands in for it), it exits 71 and runs
// nothing. The operating system refuses for real: dlock runs under a user id of its own whose
// process limit (RLIMIT_NPROC) is 1, dlock itself.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;
using Catch::Contains;
using support::child_process;

namespace {

namespace fs = std::filesystem;

struct dlock_run {
  int exit_code;
  std::string output;  // stdout and stderr
};

// A hard link where it can be (no copy of a large executable), else a copy: either way the
// program finds its helper (or none) beside the new path, as /proc/self/exe names it.
void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to);
}

// The user ids dlock runs under, one with the limit and one without: no other process has
// them. Two, because the unlimited run's watchdog, which dlock does not wait for, may outlive
// it for a while (until whoever inherits it reaps it), and would count towards the limit.
unsigned user_id(bool limited) {
  return 200000 + static_cast<unsigned>(::getpid()) % 50000 * 2 + (limited ? 1 : 0);
}

// True while a process (a zombie too: it still counts towards the limit) has the real user id
// `uid`.
bool user_has_processes(unsigned uid) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Uid:", 0) != 0) continue;
      std::istringstream fields(line.substr(4));
      unsigned real = 0;
      if (fields >> real && real == uid) return true;
      break;
    }
  }
  return false;
}

// Runs `dlock -n` under a user id no other process has (as root, since root alone may take
// another, and is itself exempt from the limit), with at most one process for it when
// `limited`: dlock itself.
dlock_run run_as_other_user(const fs::path& dlock, const fs::path& locks, const fs::path& marker,
                            bool limited) {
  const std::string uid = std::to_string(user_id(limited));
  if (limited) REQUIRE(support::wait_until([] { return !user_has_processes(user_id(true)); }));
  // A leak check at exit would need a process of its own (ASan's builds).
  std::vector<std::string> argv{
      "/bin/sh", "-c",
      "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" exec \"$0\" \"$@\" 2>&1"};
  if (limited) argv.insert(argv.end(), {"/usr/bin/prlimit", "--nproc=1:1", "--"});
  argv.insert(argv.end(), {"/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + uid,
                           "--clear-groups", "--", dlock.string(), "-n",
                           "file://" + locks.string(), "job", "--", "/usr/bin/touch",
                           marker.string()});
  child_process process(argv, {"DLOCK_URL="});
  process.close_stdin();
  std::string output = process.read_all(30s);
  const auto status = process.wait(30s);
  REQUIRE(status);
  return {support::exit_code(*status), output};
}

// Without the limit the same run works (the user id and the copy are not what fails), and the
// command runs; the marker it made is removed again.
void require_it_works_unlimited(const fs::path& dlock, const fs::path& locks,
                                const fs::path& marker) {
  const auto run = run_as_other_user(dlock, locks, marker, false);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(fs::remove(marker));
  // Its lock file belongs to that user id, which the limited run's does not share: it would
  // be refused the file before it got as far as its watchdog.
  fs::remove_all(locks);
  fs::create_directory(locks);
  fs::permissions(locks, fs::perms::all);
}

}  // namespace

TEST_CASE("dlock exits 71 and runs nothing when no watchdog can be started", "[cli]") {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer's runtime starts a thread of its own, which the limit of one refuses.
  WARN("not run under TSan");
  return;
#endif
  if (::geteuid() != 0) {
    WARN("not run: taking a user id of its own needs root (CI runs as root)");
    return;
  }
  support::temp_directory dir;
  // Everyone may use the copy and make lock files: dlock runs under an unprivileged user id.
  fs::permissions(dir.path(), fs::perms::all);
  const fs::path locks = dir.path() / "locks";
  fs::create_directory(locks);
  fs::permissions(locks, fs::perms::all);
  const fs::path marker = dir.path() / "ran";
  // A copy of dlock, with or without the helper where an installation has it.
  const fs::path installed = support::cli_path();
  const fs::path bin = dir.path() / "bin";
  fs::create_directory(bin);
  const fs::path dlock = bin / "dlock";
  link_or_copy(installed, dlock);

  SECTION("with the dlock-watchdog helper beside it") {
    const fs::path helper = support::watchdog_path();
    if (helper.empty()) {
      WARN("this build has no dlock-watchdog (not x86-64 or AArch64)");
      return;
    }
    const fs::path helper_copy =
        bin / fs::relative(helper.parent_path(), installed.parent_path()) / "dlock-watchdog";
    fs::create_directories(helper_copy.parent_path());
    link_or_copy(helper, helper_copy);
    require_it_works_unlimited(dlock, locks, marker);
    const auto run = run_as_other_user(dlock, locks, marker, true);
    CHECK(run.exit_code == 71);
    CHECK_THAT(run.output, Contains("cannot start the watchdog"));
  }
  SECTION("without it (a fork of dlock stands in)") {
    require_it_works_unlimited(dlock, locks, marker);
    const auto run = run_as_other_user(dlock, locks, marker, true);
    CHECK(run.exit_code == 71);
    CHECK_THAT(run.output, Contains("cannot start the watchdog"));
  }
  CHECK_FALSE(fs::exists(marker));
}
