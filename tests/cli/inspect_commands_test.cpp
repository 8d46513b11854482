// dlock ls, inspect and break on the file backend: what they print, what break does, and
// their usage errors. (Inspection itself is in the contract suite, tests/contract.)
#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "support.hpp"

using namespace std::chrono_literals;
using Catch::Contains;

namespace {

struct printed {
  int exit_code;
  std::string stdout_text;
};

// stdin is not a terminal here, so break does not ask.
printed dlock_prints(const std::vector<std::string>& args) {
  std::vector<std::string> argv{support::cli_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  support::child_process dlock(argv, {"DLOCK_URL="});
  dlock.close_stdin();
  std::string text = dlock.read_all(30s);
  const auto status = dlock.wait(30s);
  REQUIRE(status);
  return {support::exit_code(*status), std::move(text)};
}

}  // namespace

TEST_CASE("dlock ls lists held locks oldest first, with owner and token", "[cli][inspect]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  auto files = dlock::make_provider(url);
  auto older = files->create_lock("jobs/older").with_owner("the nightly import").acquire(5s);
  const auto started = std::chrono::system_clock::now();
  REQUIRE(support::wait_until([&] { return std::chrono::system_clock::now() - started > 20ms; }));
  auto newer = files->create_lock("jobs/newer").acquire(5s);
  auto other = files->create_lock("other").acquire(5s);

  const auto listed = dlock_prints({"ls", url, "jobs/"});
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.stdout_text, Contains("OWNER") && Contains("the nightly import") &&
                                     Contains(std::to_string(older.fencing_token())));
  CHECK(listed.stdout_text.find("jobs/older") < listed.stdout_text.find("jobs/newer"));
  CHECK(listed.stdout_text.find("other") == std::string::npos);

  const auto json = dlock_prints({"ls", url, "--json"});
  CHECK(json.exit_code == 0);
  CHECK_THAT(json.stdout_text, Contains("\"name\":\"jobs/older\"") &&
                                   Contains("\"owner\":\"the nightly import\"") &&
                                   Contains("\"name\":\"other\""));

  // Nothing has been held for an hour.
  const auto stale = dlock_prints({"ls", url, "--stale", "1h", "--json"});
  CHECK(stale.exit_code == 0);
  CHECK(stale.stdout_text == "[]\n");
}

TEST_CASE("dlock inspect shows the holders of one name", "[cli][inspect]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  auto files = dlock::make_provider(url + "?owner=report%20worker");
  auto held = files->create_semaphore("encoders", 2).acquire(5s);

  const auto screen = dlock_prints({"inspect", url, "encoders"});
  CHECK(screen.exit_code == 0);
  CHECK_THAT(screen.stdout_text, Contains("semaphore of 2") && Contains("semaphore slot") &&
                                     Contains("owner: report worker") &&
                                     Contains("waiters: not visible"));
  const auto json = dlock_prints({"inspect", url, "encoders", "--json"});
  CHECK_THAT(json.stdout_text,
             Contains("\"fencing_token\":" + std::to_string(held.fencing_token())));
  const auto free = dlock_prints({"inspect", url, "nobody-holds-this"});
  CHECK(free.exit_code == 0);
  CHECK_THAT(free.stdout_text, Contains("holders: none"));
}

TEST_CASE("dlock break frees a held lock and its holder's handle is lost", "[cli][inspect]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  auto files = dlock::make_provider(url);
  auto held = files->create_lock("stuck").acquire(5s);

  const auto broken = dlock_prints({"break", url, "stuck", "--yes"});
  CHECK(broken.exit_code == 0);
  REQUIRE(support::wait_until([&] { return held.lost(); }, 10s));
  auto next = files->create_lock("stuck").try_acquire();
  REQUIRE(next);
  CHECK(next->fencing_token() > held.fencing_token());
}

TEST_CASE("dlock ls, inspect and break refuse bad usage with exit 64", "[cli][inspect]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  CHECK(dlock_prints({"inspect", url}).exit_code == 64);
  CHECK(dlock_prints({"inspect", "name"}).exit_code == 64);  // no URL, no DLOCK_URL
  CHECK(dlock_prints({"ls", url, "a", "b"}).exit_code == 64);
  CHECK(dlock_prints({"ls", url, "--stale", "soon"}).exit_code == 64);
  CHECK(dlock_prints({"break", url, "x", "--json"}).exit_code == 64);
  CHECK(dlock_prints({"ls", url + "?owner=a%0Ab"}).exit_code == 64);
  const auto help = dlock_prints({"ls", "--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.stdout_text, Contains("dlock break [URL] NAME [--yes]"));
}
