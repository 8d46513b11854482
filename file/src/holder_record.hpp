// Private to dlock::file: the holder record an exclusive holder writes into its lock file, for
// inspect(). The fencing counter keeps the file's first bytes; the record follows it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <dlock/core/inspection.hpp>

namespace dlock::file::detail {

/// Who holds a lock file exclusively: written by the holder after its flock(2), truncated
/// away before its unlock. Trusted only while /proc/locks shows a LOCK_EX by `pid`, so a
/// record left by a crash, or a holder that is not dlock (flock(1)), is never misreported.
struct holder_record {
  party_kind kind = party_kind::exclusive;
  std::uint64_t fencing_token = 0;
  std::chrono::system_clock::time_point since;
  int pid = 0;
  std::string owner;
  std::string name;  ///< the lock's name, so listing needs no unescaping (hashed names)
  /// Until when (boot_clock_ns()) the grant's minimum hold keeps the name; 0: none. Unlike the
  /// rest, it outlives its writer: a release before it leaves the record in place.
  std::int64_t hold_until_ns = 0;
};

/// CLOCK_BOOTTIME in nanoseconds: one clock for every process on the machine, which no one
/// sets (a wall-clock jump moves no minimum hold).
std::int64_t boot_clock_ns() noexcept;

/// How long the minimum hold recorded in the file open as `fd` (of `size` bytes) still keeps
/// its name; zero when there is none. Reads the file only when it is long enough to hold a
/// record. Throws file_failure.
std::chrono::nanoseconds hold_left(int fd, std::int64_t size);

/// Writes `record` after the counter of the file open as `fd`, replacing what was there.
/// Throws file_failure.
void write_holder_record(int fd, const holder_record& record);

/// Removes the record (keeping the counter). Never throws: a record left behind is ignored
/// once its writer no longer holds the file.
void clear_holder_record(int fd) noexcept;

/// The record in the file at `path`, or nullopt when it has none (or cannot be read).
std::optional<holder_record> read_holder_record(const std::string& path);

/// The fencing counter at the start of the file at `path` (0 when it has none), for a
/// replacement that must keep tokens rising.
std::string read_counter_bytes(const std::string& path);

}  // namespace dlock::file::detail
