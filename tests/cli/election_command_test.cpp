// dlock elect and dlock leader on the file backend: the command runs while leading with its
// term, the leader is shown and followed, a lost lead ends the command.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <dlock/dlock.hpp>

#include "support.hpp"

using namespace std::chrono_literals;
using support::child_process;

namespace {

struct dlock_run {
  int exit_code;
  std::string output;  // stdout
};

dlock_run run_dlock(const std::vector<std::string>& args) {
  std::vector<std::string> argv{support::cli_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  child_process dlock(argv, {"DLOCK_URL="});
  dlock.close_stdin();
  std::string output = dlock.read_all(30s);
  const auto status = dlock.wait(30s);
  REQUIRE(status);
  return {support::exit_code(*status), output};
}

// A leader that runs `cat`: it leads until its stdin is closed.
std::vector<std::string> elect_until_stdin_closes(const std::string& url, const std::string& name,
                                                  const std::string& value) {
  return {support::cli_path(), "elect", url, name, "--value", value, "--",
          "/bin/sh", "-c", "echo term=$DLOCK_TERM; exec cat"};
}

}  // namespace

TEST_CASE("dlock elect runs the command while leading, with its term, and dlock leader shows "
          "it",
          "[cli][election]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  CHECK(run_dlock({"leader", url, "scheduler"}).exit_code == 1);
  child_process leader(elect_until_stdin_closes(url, "scheduler", "web-1"), {"DLOCK_URL="});
  const auto line = leader.read_line(30s);
  REQUIRE(line);
  REQUIRE(line->rfind("term=", 0) == 0);
  const std::string term = line->substr(5);
  const auto shown = run_dlock({"leader", url, "scheduler"});
  CHECK(shown.exit_code == 0);
  CHECK(shown.output == term + " web-1\n");
  const auto json = run_dlock({"leader", "--json", url, "scheduler"});
  CHECK(json.output ==
        "{\"election\":\"scheduler\",\"leader\":{\"value\":\"web-1\",\"term\":" + term + "}}\n");
  // Another candidate that may not wait exits with the conflict code.
  CHECK(run_dlock({"elect", "-n", "-E", "3", url, "scheduler", "--", "true"}).exit_code == 3);
  leader.close_stdin();
  const auto status = leader.wait(30s);
  REQUIRE(status);
  CHECK(support::exit_code(*status) == 0);
  CHECK(run_dlock({"leader", url, "scheduler"}).output == "none\n");
}

TEST_CASE("dlock leader --watch prints every change of leader in order", "[cli][election]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  child_process watch({support::cli_path(), "leader", "--watch", url, "jobs"}, {"DLOCK_URL="});
  CHECK(watch.read_line(30s) == std::optional<std::string>("none"));
  for (const std::string value : {"first", "second"}) {
    child_process leader(elect_until_stdin_closes(url, "jobs", value), {"DLOCK_URL="});
    const auto line = leader.read_line(30s);
    REQUIRE(line);
    CHECK(watch.read_line(30s) == line->substr(5) + " " + value);
    leader.close_stdin();
    REQUIRE(leader.wait(30s));
    CHECK(watch.read_line(30s) == std::optional<std::string>("none"));
  }
}

TEST_CASE("dlock elect ends the command when the lead is lost, with the lost-lock status",
          "[cli][election]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  child_process leader(elect_until_stdin_closes(url, "lost", "doomed"), {"DLOCK_URL="});
  REQUIRE(leader.read_line(30s));
  // Replacing the election's lock file takes the lead away (docs/election.md, file).
  const auto path = dir.path() / "lost.election";
  REQUIRE(std::filesystem::exists(path));
  std::ofstream(path.string() + ".new").put('\n');
  std::filesystem::rename(path.string() + ".new", path);
  const auto status = leader.wait(60s);
  REQUIRE(status);
  CHECK(support::exit_code(*status) == 75);
}

TEST_CASE("bad dlock elect and dlock leader usage exits 64", "[cli][election]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  CHECK(run_dlock({"leader"}).exit_code == 64);
  CHECK(run_dlock({"leader", url, "a", "b"}).exit_code == 64);
  CHECK(run_dlock({"leader", "--bogus", url, "a"}).exit_code == 64);
  CHECK(run_dlock({"elect", url, "a", "--value"}).exit_code == 64);
  CHECK(run_dlock({"elect", "--semaphore", "2", url, "a", "--", "true"}).exit_code == 64);
  CHECK(run_dlock({"elect", "--max-hold", "1", url, "a", "--", "true"}).exit_code == 64);
  CHECK(run_dlock({"elect", "--min-hold", "1", url, "a", "--", "true"}).exit_code == 64);
  CHECK(run_dlock({"leader", url, ""}).exit_code == 64);
}
