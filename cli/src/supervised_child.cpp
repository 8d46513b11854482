#include "supervised_child.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "exit_codes.hpp"
#include "raw_children.hpp"
#include "watchdog.hpp"

extern char** environ;

namespace dlock::cli {
namespace {

// Resolved before the child is made: it may make raw system calls only (raw_children.hpp),
// and execvp's PATH search allocates.
std::string resolve_command(const std::string& command) {
  if (command.empty()) throw spawn_error(exit_not_found, "dlock: empty command name");
  if (command.find('/') != std::string::npos) return command;
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string first_not_executable;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end == start ? "." : path.substr(start, end - start);
    const std::string candidate = dir + "/" + command;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      if (first_not_executable.empty()) first_not_executable = candidate;
    }
    start = end + 1;
  }
  if (!first_not_executable.empty()) {
    throw spawn_error(exit_not_executable,
                      "dlock: " + first_not_executable + ": permission denied");
  }
  throw spawn_error(exit_not_found, "dlock: " + command + ": command not found");
}

// dlock's controlling terminal, whatever its stdin is, or -1 without one.
int open_controlling_terminal() {
  return ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
}

// True when dlock is the foreground job of `terminal`: the command then gets the terminal,
// so Ctrl-C and Ctrl-Z reach it directly, as a shell would arrange.
bool in_foreground_of(int terminal) {
  return terminal >= 0 && ::tcgetpgrp(terminal) == ::getpgrp();
}

}  // namespace

supervised_child::supervised_child(const std::vector<std::string>& command,
                                   const std::vector<std::string>& extra_env,
                                   const sigset_t& child_mask,
                                   watchdog& watcher) {
  const std::string program = resolve_command(command.at(0));
  std::vector<char*> argv;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = extra_env;
  std::vector<char*> envp;
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view kv(*entry);
    // DLOCK_URL is how a password stays out of argv; the command must not inherit it.
    bool dropped = kv.starts_with("DLOCK_URL=");
    for (const auto& extra : extra_env) {
      const auto key = extra.substr(0, extra.find('=') + 1);
      if (kv.starts_with(key)) dropped = true;
    }
    if (!dropped) envp.push_back(*entry);
  }
  for (auto& extra : env_storage) envp.push_back(extra.data());
  envp.push_back(nullptr);

  // The child tells the watchdog the command's group before exec, so there is no moment when
  // a command could fork and dlock die unwatched.
  terminal_ = open_controlling_terminal();
  const bool give_terminal = in_foreground_of(terminal_);
  command_start start{.program = program.c_str(),
                      .argv = argv.data(),
                      .envp = envp.data(),
                      .parent = ::getpid(),
                      .watchdog_fd = watcher.command_pipe(),
                      .terminal = give_terminal ? terminal_ : -1,
                      .mask = &child_mask};
  const pid_t pid = start_command(start);
  if (pid < 0) {
    const int err = errno;
    if (terminal_ >= 0) ::close(terminal_);
    terminal_ = -1;
    watcher.disarm();
    throw spawn_error(exit_os_error, std::string("dlock: clone: ") + std::strerror(err));
  }
  pid_ = pid;
  owns_terminal_ = give_terminal;
  if (start.exec_errno != 0 || start.unwatched) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid_ = -1;
    if (owns_terminal_) ::tcsetpgrp(terminal_, ::getpgrp());
    owns_terminal_ = false;
    ::close(terminal_);
    terminal_ = -1;
    watcher.disarm();  // the pid it has is gone, and may be reused
    if (start.unwatched) {
      throw spawn_error(exit_os_error,
                        "dlock: cannot start the watchdog (fork failed); the command was not run");
    }
    throw spawn_error(start.exec_errno == ENOENT ? exit_not_found : exit_not_executable,
                      "dlock: " + program + ": " + std::strerror(start.exec_errno));
  }
}

supervised_child::~supervised_child() {
  if (owns_terminal_) ::tcsetpgrp(terminal_, ::getpgrp());
  if (terminal_ >= 0) ::close(terminal_);
}

bool supervised_child::group_alive() const { return pid_ > 0 && ::kill(-pid_, 0) == 0; }

void supervised_child::follow_stop() {
  if (terminal_ < 0) return;  // no job control to take part in: wait for whoever stopped it
  if (owns_terminal_) ::tcsetpgrp(terminal_, ::getpgrp());
  owns_terminal_ = false;
  ::kill(::getpid(), SIGSTOP);
  // Continued (fg or bg): the command goes on too, with the terminal if dlock has it now.
  if (in_foreground_of(terminal_)) {
    ::tcsetpgrp(terminal_, pid_);
    owns_terminal_ = true;
  }
  signal_group(SIGCONT);
}

void supervised_child::signal_group(int signo) const {
  if (pid_ > 0) ::kill(-pid_, signo);
}

std::optional<int> supervised_child::try_reap() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t reaped;
  do {
    reaped = ::waitpid(pid_, &status, WNOHANG | WUNTRACED);
  } while (reaped < 0 && errno == EINTR);
  if (reaped < 0) throw std::system_error(errno, std::generic_category(), "dlock: waitpid");
  if (reaped != pid_) return std::nullopt;
  if (WIFSTOPPED(status)) {
    follow_stop();
    return std::nullopt;
  }
  return status;
}

}  // namespace dlock::cli
