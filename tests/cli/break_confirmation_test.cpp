// dlock break asks before it frees a lock: on a terminal (a pseudo-terminal here) it breaks only
// on "y"; without a terminal it breaks only with --yes, and otherwise refuses and says why.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

#include "support.hpp"

using namespace std::chrono_literals;
using Catch::Contains;

namespace {

struct terminal_session {
  int exit_code = -1;
  std::string screen;  // everything the command wrote to its terminal, the echo included
};

// Reads the terminal's output until `until` returns true or the terminal closes (EIO once
// the child is gone); false when `deadline` passes first.
template <class Until>
bool read_screen(int master, std::string& screen, std::chrono::steady_clock::time_point deadline,
                 Until until) {
  while (!until(screen)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) return false;
    pollfd ready{master, POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(left.count()));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) return false;
    char chunk[512];
    const ssize_t got = ::read(master, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return true;  // the terminal closed: nothing more will come
    screen.append(chunk, static_cast<std::size_t>(got));
  }
  return true;
}

// Runs `dlock break URL NAME` on a pseudo-terminal, waits for its question and answers it.
terminal_session break_on_terminal(const std::string& url, const std::string& name,
                                   const std::string& answer) {
  const std::string cli = support::cli_path();
  std::vector<std::string> args{cli, "break", url, name};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Built before the fork: between fork and exec the child may only make system calls.
  char no_default_url[] = "DLOCK_URL=";
  char* envp[] = {no_default_url, nullptr};

  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execve(argv[0], argv.data(), envp);
    ::_exit(127);
  }
  terminal_session session;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  const bool asked = read_screen(master, session.screen, deadline, [](const std::string& s) {
    return s.find("[y/N]") != std::string::npos;
  });
  bool ended = false;
  if (asked) {
    const std::string line = answer + "\n";
    if (::write(master, line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
      ended = read_screen(master, session.screen, deadline,
                          [](const std::string&) { return false; });
    }
  }
  ::close(master);
  if (!ended) ::kill(pid, SIGKILL);  // it never asked, or never finished: do not wait forever
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("the terminal showed: " << session.screen);
  REQUIRE(asked);
  REQUIRE(ended);
  session.exit_code = support::exit_code(status);
  return session;
}

}  // namespace

TEST_CASE("dlock break on a terminal shows the holders and breaks only on 'y'",
          "[cli][inspect][break]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  auto files = dlock::make_provider(url + "?owner=stuck%20job");
  auto held = files->create_lock("stuck").acquire(5s);

  const auto declined = break_on_terminal(url, "stuck", "n");
  CHECK(declined.exit_code == 1);
  CHECK_THAT(declined.screen, Contains("stuck job"));  // the holder, shown before the question
  CHECK_THAT(declined.screen, Contains("not broken"));
  CHECK_FALSE(held.lost());
  CHECK(files->inspect("stuck").holders.size() == 1);

  const auto agreed = break_on_terminal(url, "stuck", "y");
  CHECK(agreed.exit_code == 0);
  CHECK_THAT(agreed.screen, Contains("broke 'stuck'"));
  REQUIRE(support::wait_until([&] { return held.lost(); }, 10s));
}

TEST_CASE("dlock break without a terminal refuses unless --yes is given", "[cli][inspect][break]") {
  support::temp_directory dir;
  const std::string url = "file://" + dir.path().string();
  auto files = dlock::make_provider(url);
  auto held = files->create_lock("stuck").acquire(5s);

  // stdin a pipe; stderr joined to stdout to read the refusal.
  support::child_process dlock({"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", support::cli_path(),
                                "break", url, "stuck"},
                               {"DLOCK_URL="});
  dlock.close_stdin();
  const std::string said = dlock.read_all(30s);
  const auto status = dlock.wait(30s);
  REQUIRE(status);
  CHECK(support::exit_code(*status) == 64);
  CHECK_THAT(said, Contains("stdin is not a terminal"));
  CHECK_THAT(said, Contains("--yes"));
  CHECK_FALSE(held.lost());
  CHECK(files->inspect("stuck").holders.size() == 1);
}
