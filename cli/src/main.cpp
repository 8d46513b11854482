// dlock: runs a command while holding a distributed lock. docs/cli.md is the manual.
//
// One thread of ours: signals arrive on a signalfd (blocked in every thread, so the
// provider's threads never take them), the acquire completes asynchronously into an
// eventfd, and a lost lock rings another; main() polls the three. Where the backend lets it
// (dlock::check_held_by_caller), main() also checks the held lock for loss itself, between
// polls, so that holding a file lock starts no thread.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <optional>
#include <stop_token>

#include <dlock/core.hpp>
#include <dlock/core/backend/held_check.hpp>

#include "backend_plugins.hpp"
#include "command_line.hpp"
#include "election_commands.hpp"
#include "exit_codes.hpp"
#include "check_command.hpp"
#include "inspect_commands.hpp"
#include "supervised_child.hpp"
#include "watchdog.hpp"

namespace {

using namespace dlock::cli;
using clock_type = std::chrono::steady_clock;

const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

bool is_forwarded(int signo) {
  for (int s : forwarded_signals) {
    if (s == signo) return true;
  }
  return false;
}

/// A file descriptor that closes itself. The eventfds are shared with the callbacks that
/// ring them, so one is closed only after the last callback that may write to it is gone.
class owned_fd {
 public:
  explicit owned_fd(int fd) : fd_(fd) {}
  ~owned_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  owned_fd(const owned_fd&) = delete;
  owned_fd& operator=(const owned_fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void ring(int eventfd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(eventfd, &one, sizeof one);
}

void drain(int eventfd) {
  std::uint64_t count = 0;
  [[maybe_unused]] auto got = ::read(eventfd, &count, sizeof count);
}

/// Reads one pending signal from the signalfd; 0 if none.
int next_signal(int signal_fd) {
  signalfd_siginfo info{};
  const auto got = ::read(signal_fd, &info, sizeof info);
  return got == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo) : 0;
}

/// Waits for any of `fds` to be readable, up to `deadline` (nullopt: no limit).
void wait_readable(std::vector<pollfd>& fds, std::optional<clock_type::time_point> deadline) {
  int timeout_ms = -1;
  if (deadline) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock_type::now());
    timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, INT_MAX));
  }
  for (auto& fd : fds) fd.revents = 0;
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
    throw std::system_error(errno, std::generic_category(), "dlock: poll");
  }
}

/// What an async acquire (or campaign) completed with: a lock_handle or a leadership.
template <typename Held>
struct acquire_result {
  std::mutex mutex;
  std::exception_ptr error;
  std::optional<Held> handle;
};

/// The completion handler that stores the result and rings `done_event`.
template <typename Held>
auto storing_into(std::shared_ptr<acquire_result<Held>> result,
                  std::shared_ptr<owned_fd> done_event) {
  return [result, done_event](std::exception_ptr error, std::optional<Held> handle) {
    {
      std::lock_guard guard(result->mutex);
      result->error = error;
      result->handle = std::move(handle);
    }
    ring(done_event->get());
  };
}

template <typename Lock>
void start_acquire(Lock& lock, lock_kind kind, std::chrono::nanoseconds timeout,
                   std::stop_token stop, std::shared_ptr<acquire_result<dlock::lock_handle>> result,
                   std::shared_ptr<owned_fd> done_event) {
  auto on_done = storing_into(std::move(result), std::move(done_event));
  if constexpr (std::is_same_v<Lock, dlock::distributed_reader_writer_lock>) {
    if (kind == lock_kind::shared) {
      lock.async_try_acquire_read(timeout, std::move(stop), std::move(on_done));
    } else {
      lock.async_try_acquire_write(timeout, std::move(stop), std::move(on_done));
    }
  } else {
    lock.async_try_acquire(timeout, std::move(stop), std::move(on_done));
  }
}

const char* kind_word(const command_line& args) {
  if (args.elect) return "leadership of election";
  switch (args.kind) {
    case lock_kind::shared: return "read lock";
    case lock_kind::write: return "write lock";
    case lock_kind::semaphore: return "semaphore slot";
    case lock_kind::exclusive: break;
  }
  return "lock";
}

int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return exit_signal_base + WTERMSIG(wait_status);
  return exit_internal;
}

std::uint64_t token_of(const dlock::lock_handle& held) { return held.fencing_token(); }
std::uint64_t token_of(const dlock::leadership& held) { return held.term(); }
void let_go(dlock::lock_handle& held) { held.release(); }
void let_go(dlock::leadership& held) { held.resign(); }

/// The command's environment: the fencing token, and for a leader its term (the same number).
std::vector<std::string> token_environment(const command_line& args, std::uint64_t token) {
  std::vector<std::string> env{"DLOCK_FENCING_TOKEN=" + std::to_string(token)};
  if (args.elect) env.push_back("DLOCK_TERM=" + std::to_string(token));
  return env;
}

/// The loss check this thread makes while the command runs: every `period`, when the
/// provider leaves it to the caller (dlock::check_held_by_caller), else never.
struct held_check {
  std::shared_ptr<dlock::provider> provider;
  std::optional<std::chrono::nanoseconds> period;
};

template <typename Held>
int wait_and_supervise(const command_line& args, const sigset_t& original_mask, int signal_fd,
                       const std::string& where, clock_type::time_point started,
                       std::stop_source& stop, std::shared_ptr<acquire_result<Held>> result,
                       std::shared_ptr<owned_fd> acquired_event, const held_check& check);

/// One attempt on this thread (`-n` on a local backend, file or memory, whose attempt is a
/// few system calls): no hop to the provider's thread, which on a busy machine may wait for a
/// core longer than the attempt takes. A networked backend's attempt may take as long as a
/// connection does, so it stays asynchronous there, where a signal can withdraw it.
template <typename Lock>
std::optional<dlock::lock_handle> try_once(Lock& lock, lock_kind kind) {
  if constexpr (std::is_same_v<Lock, dlock::distributed_reader_writer_lock>) {
    return kind == lock_kind::shared ? lock.try_acquire_read() : lock.try_acquire_write();
  } else {
    return lock.try_acquire();
  }
}

void start_locking(const command_line& args, dlock::provider& provider,
                   std::chrono::nanoseconds timeout, std::stop_token stop,
                   std::shared_ptr<acquire_result<dlock::lock_handle>> result,
                   std::shared_ptr<owned_fd> acquired_event) {
  auto limited = [&](auto lock) { return args.max_hold ? lock.with_max_hold(*args.max_hold) : lock; };
  const bool local = provider.scheme() == "file" || provider.scheme() == "memory";
  const bool one_attempt = local && timeout == std::chrono::nanoseconds::zero();
  auto acquire = [&](auto lock) {
    if (!one_attempt) {
      start_acquire(lock, args.kind, timeout, std::move(stop), result, acquired_event);
      return;
    }
    try {
      result->handle = try_once(lock, args.kind);
    } catch (...) {
      result->error = std::current_exception();
    }
    ring(acquired_event->get());
  };
  switch (args.kind) {
    case lock_kind::exclusive:
      acquire(limited(args.min_hold ? provider.create_lock(args.name).with_min_hold(*args.min_hold)
                                    : provider.create_lock(args.name)));
      break;
    case lock_kind::shared:
    case lock_kind::write:
      acquire(limited(provider.create_reader_writer_lock(args.name)));
      break;
    case lock_kind::semaphore:
      acquire(limited(provider.create_semaphore(args.name, args.semaphore_count)));
      break;
  }
}

int run(const command_line& args, const sigset_t& original_mask, int signal_fd) {
  const auto started = clock_type::now();
  std::shared_ptr<dlock::provider> provider = make_provider(args.url);
  const std::string where = std::string(provider->scheme()) + " " + provider->endpoint();
  // This thread waits for the command anyway: it checks the lock for loss too, where the
  // backend can leave that to it, so that holding the lock starts no thread.
  const held_check check{provider, dlock::check_held_by_caller(*provider)};

  auto acquired_event = std::make_shared<owned_fd>(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (acquired_event->get() < 0) {
    throw std::system_error(errno, std::generic_category(), "dlock: eventfd");
  }
  std::stop_source stop;
  const std::chrono::nanoseconds timeout = args.wait.value_or(dlock::forever);
  if (args.elect) {
    auto result = std::make_shared<acquire_result<dlock::leadership>>();
    dlock::election election = provider->create_election(args.name);
    if (args.value) election = election.with_value(*args.value);
    election.async_try_campaign(timeout, stop.get_token(), storing_into(result, acquired_event));
    return wait_and_supervise(args, original_mask, signal_fd, where, started, stop, result,
                              acquired_event, check);
  }
  auto result = std::make_shared<acquire_result<dlock::lock_handle>>();
  start_locking(args, *provider, timeout, stop.get_token(), result, acquired_event);
  return wait_and_supervise(args, original_mask, signal_fd, where, started, stop, result,
                            acquired_event, check);
}

template <typename Held>
int wait_and_supervise(const command_line& args, const sigset_t& original_mask, int signal_fd,
                       const std::string& where, clock_type::time_point started,
                       std::stop_source& stop, std::shared_ptr<acquire_result<Held>> result,
                       std::shared_ptr<owned_fd> acquired_event, const held_check& check) {
  auto lost_event = std::make_shared<owned_fd>(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (lost_event->get() < 0) {
    throw std::system_error(errno, std::generic_category(), "dlock: eventfd");
  }

  // Wait for the grant; a signal meanwhile withdraws the request (or, after a local attempt,
  // gives back what it got).
  int interrupting_signal = 0;
  std::vector<pollfd> waiting = {{signal_fd, POLLIN, 0}, {acquired_event->get(), POLLIN, 0}};
  while (true) {
    wait_readable(waiting, std::nullopt);
    if (waiting[0].revents & POLLIN) {
      for (int signo; (signo = next_signal(signal_fd)) != 0;) {
        if (!is_forwarded(signo)) continue;
        if (interrupting_signal != 0) {
          // A second signal: do not wait for the backend to withdraw the request. Exiting
          // closes our connections and files, which frees whatever it left behind.
          std::cerr << "dlock: " << strsignal(signo) << " again; exiting at once\n";
          std::_Exit(exit_signal_base + signo);
        }
        interrupting_signal = signo;
        stop.request_stop();
      }
    }
    if (waiting[1].revents & POLLIN) break;
  }
  std::optional<Held> handle;
  {
    std::lock_guard guard(result->mutex);
    if (result->error) std::rethrow_exception(result->error);
    handle = std::move(result->handle);
  }
  if (interrupting_signal != 0) {
    if (args.verbose) {
      std::cerr << "dlock: " << strsignal(interrupting_signal) << " while waiting for "
                << kind_word(args) << " '" << args.name << "' at " << where << "\n";
    }
    return exit_signal_base + interrupting_signal;
  }
  if (!handle) {
    if (args.verbose) {
      std::cerr << "dlock: " << kind_word(args) << " '" << args.name << "' at " << where
                << " is held elsewhere; gave up\n";
    }
    return args.conflict_exit_code;
  }

  const auto granted_at = clock_type::now();
  const std::uint64_t token = token_of(*handle);
  if (args.verbose) {
    const auto waited = std::chrono::duration<double, std::milli>(clock_type::now() - started);
    std::cerr << "dlock: acquired " << kind_word(args) << " '" << args.name << "' at "
              << where << (args.elect ? " (term " : " (fencing token ") << token << ") after " << std::fixed
              << std::setprecision(1) << waited.count() << " ms\n";
  }
  handle->on_lost([lost_event] { ring(lost_event->get()); });

  // The watchdog starts here, once the lock is granted, not before the attempt: a `-n` that
  // found the lock taken paid for one it did not need, and under ASan the exit of such a run
  // through the etcd plugin crashed LeakSanitizer's check (docs/design/cli-no-fork.md).
  std::optional<watchdog> watcher;
  std::optional<supervised_child> child;
  try {
    watcher.emplace(watchdog_helper_path());
    child.emplace(args.command, token_environment(args, token), original_mask, *watcher);
  } catch (const spawn_error& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code;
  }

  // Supervise: forward signals, and end the command if the lock is lost.
  std::optional<clock_type::time_point> kill_deadline;
  bool lost = false;
  int wait_status = 0;
  std::vector<pollfd> running = {{signal_fd, POLLIN, 0}, {lost_event->get(), POLLIN, 0}};
  auto forward_signals = [&] {
    if (!(running[0].revents & POLLIN)) return;
    for (int signo; (signo = next_signal(signal_fd)) != 0;) {
      if (is_forwarded(signo)) child->signal_group(signo);
    }
  };
  auto kill_when_grace_ends = [&] {
    if (kill_deadline && clock_type::now() >= *kill_deadline) {
      child->signal_group(SIGKILL);
      kill_deadline.reset();
    }
  };
  std::optional<clock_type::time_point> next_check;
  if (check.period) next_check = clock_type::now() + *check.period;
  // True when this thread's check, due now, found the lock lost.
  auto checked_lost = [&] {
    if (!next_check || clock_type::now() < *next_check) return false;
    dlock::check_held_locks(*check.provider);
    next_check = clock_type::now() + *check.period;
    return handle->lost();
  };
  auto earliest = [](std::optional<clock_type::time_point> a,
                     std::optional<clock_type::time_point> b) {
    return a && b ? std::min(*a, *b) : a ? a : b;
  };
  while (true) {
    if (auto status = child->try_reap()) {
      wait_status = *status;
      break;
    }
    wait_readable(running, earliest(kill_deadline, lost ? std::nullopt : next_check));
    forward_signals();
    bool lost_now = false;
    if (running[1].revents & POLLIN) {
      drain(lost_event->get());
      lost_now = true;
    }
    if (!lost && (checked_lost() || lost_now)) {
      lost = true;
      const bool held_too_long =
          args.max_hold && clock_type::now() - granted_at >= *args.max_hold;
      std::cerr << "dlock: lost " << kind_word(args) << " '" << args.name << "' at "
                << where << (held_too_long ? " (held longer than --max-hold)" : "")
                << "; terminating the command (SIGTERM, SIGKILL after "
                << std::chrono::duration<double>(args.kill_grace).count() << " s)\n";
      child->signal_group(SIGTERM);
      child->signal_group(SIGCONT);  // a stopped process would not see the SIGTERM
      kill_deadline = clock_type::now() + args.kill_grace;
    }
    kill_when_grace_ends();
  }
  if (lost) {
    // The rest of the group gets the same grace, then SIGKILL, whatever the leader did. The
    // group leaves no event to wait for, so look every 20 ms.
    while (child->group_alive() && kill_deadline) {
      const auto next_look = clock_type::now() + std::chrono::milliseconds(20);
      wait_readable(running, std::min(next_look, *kill_deadline));
      forward_signals();
      kill_when_grace_ends();
    }
  }
  watcher->disarm();
  // The command finished; its group may linger, but the lock no longer protects it.
  lost = lost || handle->lost();
  try {
    let_go(*handle);
    if (args.verbose && !lost) {
      std::cerr << "dlock: released " << kind_word(args) << " '" << args.name << "'\n";
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << " (the backend frees the lock by itself)\n";
  }
  if (lost) {
    if (WIFEXITED(wait_status) || WIFSIGNALED(wait_status)) {
      std::cerr << "dlock: the command ended with status " << exit_status_of(wait_status)
                << " after the lock was lost\n";
    }
    return exit_lock_lost;
  }
  return exit_status_of(wait_status);
}

}  // namespace

int main(int argc, char** argv) {
  remember_command_line(argv);
  if (auto status = run_inspect_command(std::vector<std::string>(argv + 1, argv + argc))) {
    return *status;
  }
  if (auto status = run_check_command(std::vector<std::string>(argv + 1, argv + argc))) {
    return *status;
  }
  command_line args;
  const char* default_url_text = std::getenv("DLOCK_URL");
  const auto default_url =
      default_url_text ? std::optional<std::string>(default_url_text) : std::nullopt;
  const std::string subcommand = argc > 1 ? argv[1] : "";
  if (subcommand == "leader") {
    return run_leader(std::vector<std::string>(argv + 2, argv + argc), default_url);
  }
  try {
    if (subcommand == "elect") {
      args = parse_elect_command_line(std::vector<std::string>(argv + 2, argv + argc),
                                      default_url);
    } else {
      args = parse_command_line(std::vector<std::string>(argv + 1, argv + argc), default_url);
    }
  } catch (const usage_error& e) {
    std::cerr << "dlock: " << e.what() << "\n" << usage_text;
    return exit_usage;
  }
  if (args.help) {
    std::cout << usage_text << "\n" << help_text;
    return 0;
  }
  if (args.version) {
    std::cout << "dlock " << DLOCK_VERSION << "\n";
    return 0;
  }

  try {
    hand_over_if_networked(args.url);
  } catch (const dlock::error& e) {
    std::cerr << e.what() << "\n";
    return exit_unavailable;
  }

  // An inherited SIG_IGN would make the kernel reap the command itself, and dlock could
  // never learn its status.
  ::signal(SIGCHLD, SIG_DFL);

  // Blocked before any thread exists, so every provider thread inherits the mask and the
  // signals queue on the signalfd for main() alone.
  sigset_t handled, original_mask;
  sigemptyset(&handled);
  for (int signo : forwarded_signals) sigaddset(&handled, signo);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTTOU);  // lets dlock take the terminal back from a background group
  sigaddset(&handled, SIGPIPE);
  if (::pthread_sigmask(SIG_BLOCK, &handled, &original_mask) != 0) {
    std::cerr << "dlock: cannot block signals\n";
    return exit_os_error;
  }
  owned_fd signal_fd(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  if (signal_fd.get() < 0) {
    std::cerr << "dlock: signalfd: " << std::strerror(errno) << "\n";
    return exit_os_error;
  }

  try {
    return run(args, original_mask, signal_fd.get());
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n" << usage_text;
    return exit_usage;
  } catch (const dlock::error& e) {
    std::cerr << e.what() << "\n";
    return exit_unavailable;
  } catch (const std::system_error& e) {
    std::cerr << e.what() << "\n";
    return exit_os_error;
  } catch (const std::exception& e) {
    std::cerr << "dlock: internal error: " << e.what() << "\n";
    return exit_internal;
  }
}
