// Private to dlock::file: one acquire of a lock file or of a semaphore's slot files.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>

#include "lock_files.hpp"

namespace dlock::file::detail {

class file_backend;

/// One acquire: tries the lock file (or each slot file) with LOCK_NB and, when told to
/// wait, tries again whenever one of them is closed, removed or renamed. Runs on the io
/// thread only; cancel() posts there.
///
/// A reader-writer lock goes through its writers file first (docs/file.md, "Writers
/// first"): a writer holds it exclusively from its first try until it is granted, so new
/// readers, who must take it shared on their way in, wait behind the writer.
class file_acquire final : public acquire_operation,
                           public std::enable_shared_from_this<file_acquire> {
 public:
  file_acquire(std::shared_ptr<file_backend> backend, acquire_request request,
               acquire_completion done);
  ~file_acquire() override;

  /// Makes the first attempt on the io thread.
  void start();
  void cancel() noexcept override;
  /// A watched file was closed, removed or renamed.
  void on_file_event();

  /// One pass over the lock file (or the slot files): the lease, or nullptr when all are
  /// taken. Throws connection_error, or std::invalid_argument for a semaphore max_count
  /// mismatch. Safe on any thread for an operation that is not started (the inline path).
  std::unique_ptr<lease> try_once();
  /// The slots of the semaphore not held now. Throws as try_once.
  std::uint32_t current_count();

 private:
  struct candidate {
    std::string file;
    std::string path;  // the directory's and file's, joined once per acquire
    // Kept open while waiting: closing it would raise the very close event that wakes
    // every waiter, this one included, and the waiters would wake each other forever.
    unique_fd fd;
  };

  void attempt();
  /// Locks the file of `c` without blocking, making sure the lock is on the file its path
  /// names now; false when someone else holds it or, for the lock file of a lock or
  /// reader-writer lock, a minimum hold keeps it (hold_left_). Throws file_failure.
  bool lock(candidate& c, lock_mode mode, bool respect_hold = false);
  void drop_writers_file() noexcept;
  std::vector<std::string> watched_files() const;
  void check_count();
  std::unique_ptr<lease> grant(candidate& c);
  candidate candidate_of(std::string file) const;
  void arm_retry_timer(std::chrono::nanoseconds after);
  void finish(std::exception_ptr error, std::unique_ptr<lease> granted);

  std::shared_ptr<file_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  // Set by start(): an inline attempt uses neither, so it starts no provider thread.
  boost::asio::any_io_executor executor_;
  std::optional<boost::asio::steady_timer> retry_timer_;
  std::vector<candidate> candidates_;
  // Reader-writer locks only: the writers file, taken in the request's mode before the lock
  // file and dropped once the lock file is ours or the wait ends.
  std::optional<candidate> writers_;
  bool writers_locked_ = false;
  // What the last pass found left of a minimum hold: the wait looks again when it ends, since
  // no release comes then.
  std::chrono::nanoseconds hold_left_{0};
  std::string count_file_;
  unique_fd count_fd_;
  bool waiting_ = false;
  bool finished_ = false;
};

}  // namespace dlock::file::detail
