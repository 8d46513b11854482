// A granted file lock: the open, flock'ed file (see lease.hpp).
#include "lease.hpp"

#include <sys/file.h>
#include <unistd.h>

#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "holder_record.hpp"

namespace dlock::file::detail {

file_lease::file_lease(std::shared_ptr<file_backend> backend, std::string path,
                       std::string file, unique_fd fd, bool exclusive,
                       std::uint64_t fencing_token, std::int64_t hold_until_ns)
    : lease(fencing_token),
      backend_(std::move(backend)),
      path_(std::move(path)),
      file_(std::move(file)),
      fd_(std::move(fd)),
      exclusive_(exclusive),
      hold_until_ns_(hold_until_ns) {
  backend_->add_held(file_, this);
}

file_lease::~file_lease() {
  if (fd_) {
    backend_->remove_held(file_, this);
    unlock_and_close();
  }
}

// Unlocks before closing: the close wakes waiters (inotify), and they must find it unlocked.
bool file_lease::holding_on() const noexcept {
  return hold_until_ns_ != 0 && boot_clock_ns() < hold_until_ns_;
}

void file_lease::unlock_and_close() noexcept {
  if (exclusive_ && !holding_on()) clear_holder_record(fd_.get());
  ::flock(fd_.get(), LOCK_UN);
  fd_.reset();
}

void file_lease::release() {
  if (!fd_) return;
  backend_->remove_held(file_, this);
  // Unlinking while still holding the lock is what makes removal safe: a contender that
  // opened the old file and locks it after us finds that the path no longer names it.
  // A minimum hold that goes on lives in the file, which must stay.
  if (backend_->settings().remove_files_on_release && exclusive_ && !lost() && !holding_on()) {
    try {
      if (path_names_fd(path_, fd_.get())) ::unlink(path_.c_str());
    } catch (const file_failure&) {
      // Keeping the file is always safe; only its removal was optional.
    }
  }
  unlock_and_close();
}

bool file_lease::file_replaced() {
  if (lost() || !fd_) return false;
  try {
    return !path_names_fd(path_, fd_.get());
  } catch (const file_failure& failure) {
    backend_->events().background_error(
        std::make_exception_ptr(connection_error(
            backend_->message(failure.what + " while checking a held lock"))));
    return false;
  }
}

}  // namespace dlock::file::detail
