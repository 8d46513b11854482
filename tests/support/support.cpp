#include "support.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace {

// The test PostgreSQL also serves TLS, for the tests that ask for it with sslmode in their URL.
// libpq's default, sslmode=prefer, would take TLS for every other connection of every test (and
// of the processes they start, which inherit the environment) too; they stay plain, as before
// the server had TLS, unless the environment already sets PGSSLMODE. On plain connections
// libpq's threads also leave no OpenSSL per-thread state behind for LeakSanitizer to report.
[[maybe_unused]] const bool plain_postgres_by_default =
    ::setenv("PGSSLMODE", "disable", 0) == 0;

}  // namespace

namespace support {

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = 100us;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, 10ms);
  }
  return true;
}

temp_directory::temp_directory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/dlock-test-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

temp_directory::~temp_directory() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

descriptors_used_up::descriptors_used_up() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) throw std::runtime_error("getrlimit failed");
  soft_limit_ = limit.rlim_cur;
  limit.rlim_cur = 64;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) throw std::runtime_error("setrlimit failed");
  lowered_ = true;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers_.push_back(fd);
  open_errno_ = errno;
}

descriptors_used_up::~descriptors_used_up() { give_back(); }

void descriptors_used_up::give_back() {
  for (const int fd : fillers_) ::close(fd);
  fillers_.clear();
  if (!lowered_) return;
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = soft_limit_;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  lowered_ = false;
}

std::string unique_name(const std::string& base) {
  static std::atomic<int> counter{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

child_process::child_process(std::vector<std::string> argv, std::vector<std::string> extra_env,
                             bool new_process_group) {
  int in[2];
  int out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (new_process_group) flags |= POSIX_SPAWN_SETPGROUP;
  posix_spawnattr_setflags(&attributes, flags);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);

  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (auto& extra : extra_env) env.push_back(extra);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  const int rc = ::posix_spawn(&pid_, args[0], &actions, &attributes, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(in[0]);
  ::close(out[1]);
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  if (rc != 0) {
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
}

child_process::~child_process() {
  if (!status_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait(10s);
  }
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::optional<std::string> child_process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(stdout_fd_, chunk, sizeof chunk);
    if (got <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<std::size_t>(got));
  }
}

std::string child_process::read_all(std::chrono::milliseconds timeout) {
  std::string all;
  while (auto line = read_line(timeout)) all += *line + "\n";
  all += buffer_;
  buffer_.clear();
  return all;
}

void child_process::write_stdin(const std::string& text) {
  if (::write(stdin_fd_, text.data(), text.size()) < 0) throw std::runtime_error("write failed");
}

void child_process::close_stdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

void child_process::signal(int signo) {
  if (!status_) ::kill(pid_, signo);
}

std::optional<int> child_process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  int status = 0;
  const bool exited = wait_until(
      [&] {
        const pid_t got = ::waitpid(pid_, &status, WNOHANG);
        return got == pid_;
      },
      timeout);
  if (exited) status_ = status;
  return status_;
}

int exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::string helper_path() { return DLOCK_TEST_HELPER_PATH; }
void run_contenders(const std::string& url, const std::string& name, int processes,
                    int iterations, const std::filesystem::path& log) {
  std::vector<std::unique_ptr<child_process>> children;
  for (int i = 0; i < processes; ++i) {
    children.push_back(std::make_unique<child_process>(std::vector<std::string>{
        helper_path(), "contend", url, name, std::to_string(iterations), log.string()}));
  }
  for (auto& child : children) {
    const auto status = child->wait(std::chrono::minutes(2));
    if (!status || exit_code(*status) != 0) {
      throw std::runtime_error("a contending helper process failed or hung");
    }
  }
}

int count_exclusive_sections(const std::filesystem::path& log) {
  std::ifstream in(log);
  if (!in) throw std::runtime_error("cannot read " + log.string());
  std::string kind, token, pid, inside_pid;
  std::uint64_t previous = 0;
  int sections = 0;
  for (int line = 1; in >> kind >> token >> pid; ++line) {
    const std::string where = log.string() + ":" + std::to_string(line) + ": ";
    if (kind == "B") {
      if (!inside_pid.empty()) {
        throw std::runtime_error(where + "process " + pid + " entered while " + inside_pid +
                                 " was inside");
      }
      if (std::stoull(token) <= previous) {
        throw std::runtime_error(where + "fencing token " + token + " after " +
                                 std::to_string(previous));
      }
      previous = std::stoull(token);
      inside_pid = pid;
    } else if (kind == "E" && inside_pid == pid) {
      inside_pid.clear();
      ++sections;
    } else {
      throw std::runtime_error(where + "unexpected '" + kind + " " + token + " " + pid + "'");
    }
  }
  return sections;
}

std::string cli_path() { return DLOCK_CLI_PATH; }
std::string watchdog_path() { return DLOCK_WATCHDOG_PATH; }

}  // namespace support
