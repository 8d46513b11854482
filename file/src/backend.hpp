// Private to dlock::file: the backend behind dlock::file::provider.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/held_check.hpp>
#include <dlock/core/backend/election.hpp>
#include <dlock/file/options.hpp>

#include "lock_files.hpp"

namespace dlock::file::detail {

class file_acquire;
class file_lease;

/// The lock directory. Held locks are checked every monitor_period, from the first grant on,
/// on the provider's thread, or by the caller after check_held_by_caller().
/// From the provider's first wait on, the directory is watched with inotify: waiters wake when a lock file is closed (a
/// holder released or died), and held locks are checked at once when a file is removed or
/// renamed. The watch is not made sooner because a process that ever had one pays for its
/// teardown when it closes it or exits (the kernel waits for an RCU grace period, about 4 to
/// 14 ms), which would make a short-lived holder such as the dlock command several times
/// slower than flock(1).
class file_backend final : public dlock::backend,
                           public inline_acquirer,
                           public caller_loss_check,
                           public std::enable_shared_from_this<file_backend> {
 public:
  /// Creates the directory and its watch. Throws connection_error when it cannot.
  explicit file_backend(const options& opts);
  ~file_backend() override;

  std::string_view scheme() const noexcept override { return "file"; }
  std::string min_hold_refusal() const override { return {}; }
  std::string endpoint() const override { return directory_.string(); }
  inline_acquirer* as_inline_acquirer() noexcept override { return this; }
  bool acquires_inline_locally() const noexcept override { return true; }
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;
  /// The monitor's check, by the caller from now on: no monitor is armed at later grants.
  caller_loss_check* as_caller_loss_check() noexcept override { return this; }
  std::optional<std::chrono::nanoseconds> check_held_by_caller() override;
  void check_held_locks() override { check_held(nullptr); }
  std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) override;
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;

  // inspector.cpp: holders from /proc/locks and the holder records; a break replaces files.
  lock_inspection inspect(const std::string& name) override;
  std::vector<lock_inspection> list_locks(const std::string& prefix) override;
  void break_lock(const std::string& name) override;

  const std::filesystem::path& directory() const noexcept { return directory_; }
  const options& settings() const noexcept { return options_; }
  /// The path of `file` in the directory: a string join, cheaper than path's operator/,
  /// which parses both sides into components.
  std::string path_of(std::string_view file) const;
  /// The file of `name`'s lock and reader-writer lock: `<escaped name>.lock`.
  std::string lock_file_name(std::string_view name) const;
  /// The base of `name`'s semaphore files: `<escaped name>.semaphore`.
  std::string semaphore_file_name(std::string_view name) const;
  /// The file where writers of the reader-writer lock `name` queue ahead of new readers.
  std::string writers_file_name(std::string_view name) const;
  /// The file of `name`'s upgrade gate: `<escaped name>.upgrade-gate`.
  std::string gate_file_name(std::string_view name) const;
  /// The lock file of the election `name`, with its leader record: `<escaped name>.election`.
  std::string election_file_name(std::string_view name) const;

  std::shared_ptr<election_board> elections() override;

  // Waiters and held leases, by file name. Waiters are touched only on the io thread;
  // held leases also from the threads that release them, under held_mutex_.
  void add_waiter(const std::string& file, file_acquire* waiter);
  void remove_waiter(const std::string& file, file_acquire* waiter);
  void add_held(const std::string& file, file_lease* lease);
  void remove_held(const std::string& file, file_lease* lease);

  /// Calls `changed` (on the io thread) when the election file `file` may have a new leader
  /// record: it was written, closed after writing, removed or renamed (inotify), and once as
  /// the watch begins; until the returned object is destroyed. Any thread.
  std::shared_ptr<void> watch_leader(const std::string& file, std::function<void()> changed);

 private:
  void start_watching();
  [[noreturn]] void throw_watch_error(const char* what) const;
  /// The directory's inotify mask: replacements always, closes while anyone waits, writes
  /// while an election is observed. io thread.
  void update_watch_mask();
  void tell_leader_watches(const std::vector<std::string>* files);  // nullptr: all
  void wait_for_events();
  void read_events();
  void check_held(const std::string* file);
  /// Starts the monitor, and with it the provider's thread (io_thread), at the first grant:
  /// a provider that holds no lock (a `dlock -n` that finds it taken) needs neither.
  void arm_monitor();
  void schedule_monitor();

  options options_;
  std::filesystem::path directory_;
  unique_fd inotify_;  // from the first wait on; touched only on the io thread
  std::optional<boost::asio::posix::stream_descriptor> events_;
  std::optional<boost::asio::steady_timer> monitor_timer_;
  std::unordered_map<std::string, std::vector<file_acquire*>> waiters_;
  std::mutex held_mutex_;
  std::unordered_multimap<std::string, file_lease*> held_;
  bool monitor_armed_ = false;  // under held_mutex_
  bool caller_checks_ = false;  // under held_mutex_: check_held_by_caller() was called
  std::mutex leader_watches_mutex_;
  std::unordered_multimap<std::string, std::shared_ptr<watch_callback>> leader_watches_;
};

}  // namespace dlock::file::detail
