// The dlock command line: usage, failure paths and exit codes, the terminal; its locking is in
// the contract suite (tests/contract/cli_locking_test.cpp), run against every backend.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "support.hpp"

using namespace std::chrono_literals;
using Catch::Contains;
using support::child_process;

namespace {

struct outcome {
  int exit_code;
  std::string output;  // stdout and stderr
};

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

outcome run_dlock(const std::vector<std::string>& args,
                  const std::vector<std::string>& env = {"DLOCK_URL="}) {
  std::string script = "exec " + shell_quote(support::cli_path());
  for (const auto& arg : args) script += " " + shell_quote(arg);
  script += " 2>&1";
  child_process dlock({"/bin/sh", "-c", script}, env);
  dlock.close_stdin();
  std::string output = dlock.read_all(30s);
  const auto status = dlock.wait(30s);
  REQUIRE(status);
  return {support::exit_code(*status), output};
}

}  // namespace

TEST_CASE("dlock --help and --version succeed", "[cli]") {
  const auto help = run_dlock({"--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Contains("usage: dlock") && Contains("DLOCK_FENCING_TOKEN"));
  const auto version = run_dlock({"--version"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Contains("dlock 0."));
}

TEST_CASE("bad usage exits 64 with a one-line error naming what is wrong, then the usage",
          "[cli]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  struct bad_usage {
    std::vector<std::string> args;
    std::string complaint;
  };
  const std::vector<bad_usage> cases = {
      {{}, "missing the lock NAME"},
      {{url, "job", "true"}, "missing '--'"},
      {{url, "job", "--"}, "missing the COMMAND"},
      {{"job", "--", "true"}, "DLOCK_URL is not set"},
      {{url, "--", "true"}, "missing the lock NAME after the URL"},
      {{"--frobnicate", url, "job", "--", "true"}, "unknown option '--frobnicate'"},
      {{"-w", "soon", url, "job", "--", "true"}, "-w wants seconds"},
      {{"-w", "-3", url, "job", "--", "true"}, "-w wants"},
      {{"-E", "300", url, "job", "--", "true"}, "-E wants an integer from 0 to 255"},
      {{"--max-hold", "forever", url, "job", "--", "true"}, "--max-hold wants seconds"},
      {{"--min-hold", "soon", url, "job", "--", "true"}, "--min-hold wants seconds"},
      {{"-s", "--min-hold", "2", url, "job", "--", "true"}, "--min-hold is for exclusive locks"},
      {{"--kill-grace", "-1", url, "job", "--", "true"}, "--kill-grace wants"},
      {{"--semaphore", "0", url, "job", "--", "true"}, "--semaphore wants an integer"},
      {{"-s", "--semaphore", "2", url, "job", "--", "true"}, "conflicts"},
      {{"-n", "x", "y", "z", "--", "true"}, "too many arguments"},
      {{"nosuch://host/x", "job", "--", "true"}, "unknown provider URL scheme 'nosuch'"},
      {{url + "?colour=blue", "job", "--", "true"}, "colour"},
      {{url, "", "--", "true"}, "empty"},
  };
  for (const auto& c : cases) {
    INFO("dlock " << [&] {
      std::string joined;
      for (const auto& a : c.args) joined += a + " ";
      return joined;
    }());
    const auto result = run_dlock(c.args);
    CHECK(result.exit_code == 64);
    CHECK_THAT(result.output, Contains(c.complaint) && Contains("usage: dlock"));
  }
}

TEST_CASE("dlock never prints a password from the URL", "[cli]") {
  const auto result = run_dlock({"nosuch://admin:hunter2@127.0.0.1:1/x", "job", "--", "true"});
  CHECK(result.exit_code == 64);
  CHECK_THAT(result.output, !Contains("hunter2"));
}

TEST_CASE("the command does not inherit DLOCK_URL, which may carry a password", "[cli]") {
  support::temp_directory dir;
  const auto result =
      run_dlock({"job", "--", "/bin/sh", "-c", "echo \"url=[${DLOCK_URL-unset}]\""},
                {"DLOCK_URL=file://" + dir.path().string()});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("url=[unset]"));
  CHECK(std::filesystem::exists(dir.path() / "job.lock"));  // the URL was used by dlock itself
}

TEST_CASE("a backend that cannot be set up exits 69, not the conflict code", "[cli]") {
  support::temp_directory dir;
  const auto blocker = dir.path() / "not-a-directory";
  std::ofstream(blocker) << "a file where the lock directory should be";
  const auto result = run_dlock({"file://" + (blocker / "locks").string(), "job", "--", "true"});
  CHECK(result.exit_code == 69);
  CHECK_THAT(result.output, Contains((blocker / "locks").string()));
}

TEST_CASE("a command that cannot run exits 127 or 126 and frees the lock", "[cli]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  const auto missing = run_dlock({url, "job", "--", "no-such-command-dlock-test"});
  CHECK(missing.exit_code == 127);
  CHECK_THAT(missing.output, Contains("no-such-command-dlock-test"));
  const auto script = dir.path() / "not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ::chmod(script.c_str(), 0644);
  const auto denied = run_dlock({url, "job", "--", script.string()});
  CHECK(denied.exit_code == 126);
  CHECK(run_dlock({"-n", url, "job", "--", "true"}).exit_code == 0);
}

TEST_CASE("in the foreground of a terminal, the command's group gets the terminal", "[cli]") {
  support::temp_directory dir;
  // script(1) runs dlock on a fresh pseudo-terminal, in the foreground. In /proc/PID/stat,
  // field 5 is the process group and field 8 the terminal's foreground group.
  const std::string command =
      shell_quote(support::cli_path()) + " file://" + dir.path().string() +
      " tty-job -- /bin/sh -c 'set -- $(cat /proc/$$/stat); "
      "[ \"$5\" = \"$8\" ] && echo command-has-terminal; exit 3'";
  child_process session({"/usr/bin/script", "-qec", command, "/dev/null"});
  session.close_stdin();
  const std::string output = session.read_all(30s);
  const auto status = session.wait(30s);
  REQUIRE(status);
  CHECK_THAT(output, Contains("command-has-terminal"));
}
