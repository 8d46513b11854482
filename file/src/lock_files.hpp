// Private to dlock::file: the system calls on lock files, without any waiting or threads.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/election.hpp>

namespace dlock::file::detail {

/// An owned file descriptor.
class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

/// Thrown by these helpers for an unexpected errno; the backend turns it into a
/// dlock::connection_error naming the lock.
struct file_failure {
  std::string what;  ///< "open(/dir/x.lock): Permission denied"
};

/// Opens (creating if missing, mode 0666 less umask) `path` for reading and writing.
unique_fd open_lock_file(const std::string& path);

/// One non-blocking flock(2): true when taken, false when someone else holds it.
bool try_flock(int fd, lock_mode mode);

/// True when `path` still names the file open as `fd` (it was not removed or replaced).
/// Only then does a lock taken on `fd` exclude everyone who opens `path` later. `size`, when
/// given, gets the file's size.
bool path_names_fd(const std::string& path, int fd, std::int64_t* size = nullptr);

/// Reads the fencing counter at the start of the file open as `fd`, stores the next token and
/// returns it. The next token is max(counter + 1, microseconds since the epoch), so tokens
/// keep rising even after the file was removed and its counter lost. Unless `sole_holder`
/// (the caller holds LOCK_EX on this very file, so no other grant can run), updates are
/// serialised by an open-file-description lock on the counter's bytes, which does not
/// interact with flock(2), so readers holding LOCK_SH together still get distinct tokens.
std::uint64_t next_fencing_token(int fd, bool sole_holder);

/// The fencing counter's bytes at the start of every counter-carrying file (docs/file.md).
inline constexpr std::size_t fencing_counter_bytes = 21;

/// One granted flock(2) lock, as /proc/locks lists it.
struct flock_entry {
  dev_t device = 0;
  ino_t inode = 0;
  bool exclusive = false;
  int pid = 0;  ///< in this process's PID namespace
};

/// Every granted flock(2) lock now (blocked requests are left out). Throws file_failure.
std::vector<flock_entry> flock_entries();

/// Whether `entry` is a lock on `file` (from stat), matched as is_flocked matches.
bool locks_file(const flock_entry& entry, const struct stat& file);

/// The files that hold a granted flock(2) lock now, as (device, inode) pairs, from
/// /proc/locks: a read that cannot disturb the holders or the waiters of those locks.
/// /proc/locks hides locks of processes in other PID namespaces.
std::set<std::pair<dev_t, ino_t>> flocked_files();

/// Whether `file` (from stat) is among `flocked`. File systems whose stat() reports another
/// device than /proc/locks (btrfs subvolumes, overlayfs: an anonymous device, major 0) are
/// matched on the inode alone.
bool is_flocked(const std::set<std::pair<dev_t, ino_t>>& flocked, const struct stat& file);

/// Checks (storing it if the file is new) the semaphore's max_count in the file open as `fd`.
/// Returns the stored count, which differs from `max_count` on a mismatch.
std::uint32_t check_semaphore_count(int fd, std::uint32_t max_count);

/// Writes the leader record of term `term` with `value` into the election lock file open as
/// `fd`, after its counter. Returns false (writing nothing) when the counter has moved past
/// `term`: a later grant leads.
bool write_leader_record(int fd, std::uint64_t term, std::string_view value);

/// Removes the leader record from the file open as `fd` if its term is `term`.
void clear_leader_record(int fd, std::uint64_t term);

/// The leader record in the file open as `fd`, if its term is the counter's latest token.
/// Whether that term's holder still holds the lock is the caller's to check.
std::optional<leader_info> read_leader_record(int fd);

}  // namespace dlock::file::detail
