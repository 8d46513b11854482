// Private to dlock::file: a granted file lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <dlock/core/backend/lease.hpp>

#include "lock_files.hpp"

namespace dlock::file::detail {

class file_backend;

/// A granted file lock: the open, flock'ed file.
class file_lease final : public dlock::lease {
 public:
  /// `hold_until_ns` (boot_clock_ns(); 0: none): its minimum hold, whose record a release
  /// before it leaves in the file.
  file_lease(std::shared_ptr<file_backend> backend, std::string path, std::string file,
             unique_fd fd, bool exclusive, std::uint64_t fencing_token,
             std::int64_t hold_until_ns = 0);
  ~file_lease() override;
  void release() override;

  /// True when its path no longer names its file (removed or replaced) and it is not yet
  /// marked lost. Called under held_mutex_, so it never marks the lease lost itself.
  bool file_replaced();

  /// The open, flock'ed file and its path (what an election's board writes its record into).
  int fd() const noexcept { return fd_.get(); }
  const std::string& path() const noexcept { return path_; }

 private:
  void unlock_and_close() noexcept;
  bool holding_on() const noexcept;

  std::shared_ptr<file_backend> backend_;
  std::string path_;
  std::string file_;
  unique_fd fd_;
  bool exclusive_;
  std::int64_t hold_until_ns_;
};

}  // namespace dlock::file::detail
