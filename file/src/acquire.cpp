// One acquire of a lock file or of a semaphore's slot files (see acquire.hpp).
#include "acquire.hpp"

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "holder_record.hpp"
#include "lease.hpp"

namespace dlock::file::detail {

file_acquire::file_acquire(std::shared_ptr<file_backend> backend, acquire_request request,
                           acquire_completion done)
    : backend_(std::move(backend)),
      request_(std::move(request)),
      done_(std::move(done)) {
  if (request_.kind == resource_kind::semaphore) {
    const std::string base = backend_->semaphore_file_name(request_.name);
    count_file_ = backend_->path_of(base);
    for (std::uint32_t i = 0; i < request_.max_count; ++i) {
      candidates_.push_back(candidate_of(base + "." + std::to_string(i)));
    }
  } else if (request_.kind == resource_kind::upgrade_gate) {
    candidates_.push_back(candidate_of(backend_->gate_file_name(request_.name)));
  } else if (request_.kind == resource_kind::election) {
    candidates_.push_back(candidate_of(backend_->election_file_name(request_.name)));
  } else {
    candidates_.push_back(candidate_of(backend_->lock_file_name(request_.name)));
  }
  if (request_.kind == resource_kind::reader_writer_lock) {
    writers_.emplace(candidate_of(backend_->writers_file_name(request_.name)));
  }
}

file_acquire::candidate file_acquire::candidate_of(std::string file) const {
  std::string path = backend_->path_of(file);
  return candidate{std::move(file), std::move(path), {}};
}

// An inline attempt that got the writers file but not the lock file lets go of it here.
file_acquire::~file_acquire() { drop_writers_file(); }

void file_acquire::start() {
  executor_ = backend_->executor();
  boost::asio::post(executor_, [self = shared_from_this()] { self->attempt(); });
}

void file_acquire::cancel() noexcept {
  boost::asio::post(executor_, [self = shared_from_this()] {
    if (!self->finished_) self->finish(nullptr, nullptr);
  });
}

void file_acquire::on_file_event() {
  attempt();
  // The kernel reports a close before it drops the closer's flock, so a release by another
  // program (flock(1), a crashed process) can still be in the way of the attempt it woke;
  // look again shortly rather than after a whole retry_period.
  if (!finished_) arm_retry_timer(std::chrono::milliseconds(2));
}

void file_acquire::attempt() {
  if (finished_) return;
  std::unique_ptr<lease> granted;
  try {
    granted = try_once();
  } catch (...) {
    finish(std::current_exception(), nullptr);
    return;
  }
  if (granted || !request_.wait) {
    finish(nullptr, std::move(granted));
    return;
  }
  if (!waiting_) {
    waiting_ = true;
    backend_->events().acquire_waiting();
    for (const std::string& file : watched_files()) backend_->add_waiter(file, this);
    // A release between our try and the registration raised no event we would see: try
    // once more now that any later one will.
    attempt();
    return;
  }
  arm_retry_timer(hold_left_ > std::chrono::nanoseconds::zero()
                      ? std::min<std::chrono::nanoseconds>(hold_left_,
                                                           backend_->settings().retry_period)
                      : backend_->settings().retry_period);
}

std::unique_ptr<lease> file_acquire::try_once() {
  hold_left_ = std::chrono::nanoseconds::zero();
  // Semaphores, upgrade gates and elections have files of their own, which no hold reaches.
  const bool respect_hold =
      request_.kind == resource_kind::lock || request_.kind == resource_kind::reader_writer_lock;
  try {
    if (request_.kind == resource_kind::semaphore) check_count();
    if (writers_ && !writers_locked_) {
      // Behind a waiting writer (exclusive), or, for a writer, behind readers on their way
      // in (shared, for the moment between their two locks) and other writers.
      if (!lock(*writers_, request_.mode)) return nullptr;
      writers_locked_ = true;
    }
    for (candidate& c : candidates_) {
      if (!lock(c, request_.mode, respect_hold)) continue;
      auto granted = grant(c);
      drop_writers_file();
      return granted;
    }
  } catch (const file_failure& failure) {
    throw connection_error(backend_->message(failure.what, request_.name));
  }
  return nullptr;
}

bool file_acquire::lock(candidate& c, lock_mode mode, bool respect_hold) {
  const std::string& path = c.path;
  for (int reopen = 0;; ++reopen) {
    if (!c.fd) c.fd = open_lock_file(path);
    if (!try_flock(c.fd.get(), mode)) return false;
    std::int64_t size = 0;
    if (path_names_fd(path, c.fd.get(), &size)) {
      if (respect_hold) {
        hold_left_ = hold_left(c.fd.get(), size);
        if (hold_left_ > std::chrono::nanoseconds::zero()) {
          ::flock(c.fd.get(), LOCK_UN);
          return false;
        }
      }
      return true;
    }
    // Locked a file that was removed or replaced since we opened it: that lock
    // excludes nobody. Drop it and lock what the path names now.
    c.fd.reset();
    if (reopen == 1000) {
      throw file_failure{path + " keeps being replaced while being locked"};
    }
  }
}

// Unlocks, then closes: the close wakes the waiters (inotify), who must find it unlocked.
// With remove_files_on_release the file goes too, by whoever can hold it alone, as a lock
// file goes: unlinked while locked, so a contender that locks the old file sees it replaced.
void file_acquire::drop_writers_file() noexcept {
  if (!writers_ || !writers_->fd) return;
  const int fd = writers_->fd.get();
  if (backend_->settings().remove_files_on_release && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    try {
      if (path_names_fd(writers_->path, fd)) ::unlink(writers_->path.c_str());
    } catch (const file_failure&) {
      // Keeping the file is always safe; only its removal was optional.
    }
  }
  ::flock(fd, LOCK_UN);
  writers_->fd.reset();
  writers_locked_ = false;
}

std::vector<std::string> file_acquire::watched_files() const {
  std::vector<std::string> files;
  for (const candidate& c : candidates_) files.push_back(c.file);
  if (writers_) files.push_back(writers_->file);
  return files;
}

std::uint32_t file_acquire::current_count() {
  try {
    check_count();
    const auto held = flocked_files();
    std::uint32_t free = 0;
    for (const candidate& c : candidates_) {
      struct stat slot {};
      if (::stat(c.path.c_str(), &slot) != 0 || !is_flocked(held, slot)) ++free;
    }
    return free;
  } catch (const file_failure& failure) {
    throw connection_error(backend_->message(failure.what, request_.name));
  }
}

void file_acquire::check_count() {
  if (count_fd_) return;
  count_fd_ = open_lock_file(count_file_);
  const std::uint32_t stored = check_semaphore_count(count_fd_.get(), request_.max_count);
  if (stored != request_.max_count) {
    throw backend_->max_count_mismatch(request_, stored, count_file_);
  }
}

std::unique_ptr<lease> file_acquire::grant(candidate& c) {
  const int counter_fd = request_.kind == resource_kind::semaphore ? count_fd_.get() : c.fd.get();
  // A LOCK_EX holder of its own file is the only grant that can touch the counter; readers
  // and the slots of a semaphore share theirs and take the byte-range lock.
  const bool sole_holder =
      request_.kind != resource_kind::semaphore && request_.mode == lock_mode::exclusive;
  const std::uint64_t token = next_fencing_token(counter_fd, sole_holder);
  const std::int64_t hold_until =
      request_.min_hold > std::chrono::nanoseconds::zero()
          ? boot_clock_ns() + static_cast<std::int64_t>(request_.min_hold.count())
          : 0;
  // Readers share their file, so only an exclusive holder can say who it is there. An
  // election's file keeps the leader's record in that place instead (election_board.cpp).
  if (request_.mode == lock_mode::exclusive && request_.kind != resource_kind::upgrade_gate &&
      request_.kind != resource_kind::election) {
    write_holder_record(c.fd.get(), holder_record{
        .kind = request_.kind == resource_kind::semaphore            ? party_kind::semaphore_slot
                : request_.kind == resource_kind::reader_writer_lock ? party_kind::write
                                                                     : party_kind::exclusive,
        .fencing_token = token,
        .since = std::chrono::system_clock::now(),
        .pid = static_cast<int>(::getpid()),
        .owner = request_.owner,
        .name = request_.name,
        .hold_until_ns = hold_until});
  }
  // The path goes with the grant (nothing locks this candidate again); the file name stays,
  // since finish() still names the files this acquire waited on.
  return std::make_unique<file_lease>(backend_, std::move(c.path), c.file, std::move(c.fd),
                                      request_.mode == lock_mode::exclusive, token, hold_until);
}

void file_acquire::arm_retry_timer(std::chrono::nanoseconds after) {
  if (!retry_timer_) retry_timer_.emplace(backend_->executor());
  retry_timer_->expires_after(after);
  retry_timer_->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->attempt();
  });
}

void file_acquire::finish(std::exception_ptr error, std::unique_ptr<lease> granted) {
  finished_ = true;
  if (retry_timer_) retry_timer_->cancel();
  if (waiting_) {
    for (const std::string& file : watched_files()) backend_->remove_waiter(file, this);
    waiting_ = false;
  }
  drop_writers_file();
  candidates_.clear();
  count_fd_.reset();
  auto done = std::move(done_);
  // As in core: let the caller, not this thread, hold the last reference to the backend.
  backend_.reset();
  done(std::move(error), std::move(granted));
}

}  // namespace dlock::file::detail
