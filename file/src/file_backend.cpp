#include "file_backend.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>
#include <dlock/core/backend/naming.hpp>

namespace dlock::file::detail {

namespace {

// Escaped names stay well below NAME_MAX (255) with the longest suffix,
// ".semaphore.4294967295".
constexpr std::size_t max_escaped_bytes = 200;

// Removals and renames are always watched: they may mean a held lock is lost.
constexpr std::uint32_t replacement_events =
    IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// Closes wake waiters, and are watched only while there are some: every release closes a
// file, and a watched close costs the releaser a wake-up of this provider's thread.
constexpr std::uint32_t close_events = IN_CLOSE_WRITE | IN_CLOSE_NOWRITE;

}  // namespace

/// One acquire: tries the lock file (or each slot file) with LOCK_NB and, when told to
/// wait, tries again whenever one of them is closed, removed or renamed. Runs on the io
/// thread only; cancel() posts there.
class file_acquire final : public acquire_operation,
                           public std::enable_shared_from_this<file_acquire> {
 public:
  file_acquire(std::shared_ptr<file_backend> backend, acquire_request request,
               acquire_completion done)
      : backend_(std::move(backend)),
        request_(std::move(request)),
        done_(std::move(done)),
        executor_(backend_->executor()),
        retry_timer_(executor_) {
    if (request_.kind == primitive::semaphore) {
      const std::string base = backend_->semaphore_file_name(request_.name);
      count_file_ = backend_->directory() / base;
      for (std::uint32_t i = 0; i < request_.max_count; ++i) {
        candidates_.push_back({base + "." + std::to_string(i), {}});
      }
    } else {
      candidates_.push_back({backend_->lock_file_name(request_.name), {}});
    }
  }

  void start() {
    boost::asio::post(executor_, [self = shared_from_this()] { self->attempt(); });
  }

  void cancel() noexcept override {
    boost::asio::post(executor_, [self = shared_from_this()] {
      if (!self->finished_) self->finish(nullptr, nullptr);
    });
  }

  /// A watched file was closed, removed or renamed.
  void on_file_event() {
    attempt();
    // The kernel reports a close before it drops the closer's flock, so a release by another
    // program (flock(1), a crashed process) can still be in the way of the attempt it woke;
    // look again shortly rather than after a whole retry_period.
    if (!finished_) arm_retry_timer(std::chrono::milliseconds(2));
  }

 private:
  struct candidate {
    std::string file;
    // Kept open while waiting: closing it would raise the very close event that wakes
    // every waiter, this one included, and the waiters would wake each other forever.
    unique_fd fd;
  };

  void attempt() {
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
      for (const candidate& c : candidates_) backend_->add_waiter(c.file, this);
      // A release between our try and the registration raised no event we would see: try
      // once more now that any later one will.
      attempt();
      return;
    }
    arm_retry_timer(backend_->settings().retry_period);
  }

 public:
  /// One pass over the lock file (or the slot files): the lease, or nullptr when all are
  /// taken. Throws connection_error, or std::invalid_argument for a semaphore max_count
  /// mismatch. Safe on any thread for an operation that is not started (the inline path).
  std::unique_ptr<lease> try_once() {
    try {
      if (request_.kind == primitive::semaphore) check_count();
      for (candidate& c : candidates_) {
        const std::filesystem::path path = backend_->directory() / c.file;
        for (int reopen = 0;; ++reopen) {
          if (!c.fd) c.fd = open_lock_file(path);
          if (!try_flock(c.fd.get(), request_.mode)) break;
          if (path_names_fd(path, c.fd.get())) return grant(c, path);
          // Locked a file that was removed or replaced since we opened it: that lock
          // excludes nobody. Drop it and lock what the path names now.
          c.fd.reset();
          if (reopen == 1000) {
            throw file_failure{path.string() + " keeps being replaced while being locked"};
          }
        }
      }
    } catch (const file_failure& failure) {
      throw connection_error("dlock: file " + backend_->endpoint() + ": " + failure.what +
                             " for lock '" + naming::quote_for_message(request_.name) + "'");
    }
    return nullptr;
  }

  /// The slots of the semaphore not held now. Throws as try_once.
  std::uint32_t current_count() {
    try {
      check_count();
      const auto held = flocked_files();
      std::uint32_t free = 0;
      for (const candidate& c : candidates_) {
        struct stat slot {};
        const auto path = backend_->directory() / c.file;
        if (::stat(path.c_str(), &slot) != 0 || !is_flocked(held, slot)) ++free;
      }
      return free;
    } catch (const file_failure& failure) {
      throw connection_error("dlock: file " + backend_->endpoint() + ": " + failure.what +
                             " for semaphore '" + naming::quote_for_message(request_.name) + "'");
    }
  }

 private:
  void check_count() {
    if (count_fd_) return;
    count_fd_ = open_lock_file(count_file_);
    const std::uint32_t stored = check_semaphore_count(count_fd_.get(), request_.max_count);
    if (stored != request_.max_count) {
      throw backend_->max_count_mismatch(request_, stored, count_file_.string());
    }
  }

  std::unique_ptr<lease> grant(candidate& c, const std::filesystem::path& path) {
    const int counter_fd = request_.kind == primitive::semaphore ? count_fd_.get() : c.fd.get();
    // A LOCK_EX holder of its own file is the only grant that can touch the counter; readers
    // and the slots of a semaphore share theirs and take the byte-range lock.
    const bool sole_holder =
        request_.kind != primitive::semaphore && request_.mode == lock_mode::exclusive;
    const std::uint64_t token = next_fencing_token(counter_fd, sole_holder);
    return std::make_unique<file_lease>(backend_, path, c.file, std::move(c.fd),
                                        request_.mode == lock_mode::exclusive, token);
  }

  void arm_retry_timer(std::chrono::nanoseconds after) {
    retry_timer_.expires_after(after);
    retry_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->attempt();
    });
  }

  void finish(std::exception_ptr error, std::unique_ptr<lease> granted) {
    finished_ = true;
    retry_timer_.cancel();
    if (waiting_) {
      for (const candidate& c : candidates_) backend_->remove_waiter(c.file, this);
      waiting_ = false;
    }
    candidates_.clear();
    count_fd_.reset();
    auto done = std::move(done_);
    // As in core: let the caller, not this thread, hold the last reference to the backend.
    backend_.reset();
    done(std::move(error), std::move(granted));
  }

  std::shared_ptr<file_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  boost::asio::any_io_executor executor_;
  boost::asio::steady_timer retry_timer_;
  std::vector<candidate> candidates_;
  std::filesystem::path count_file_;
  unique_fd count_fd_;
  bool waiting_ = false;
  bool finished_ = false;
};

file_backend::file_backend(const options& opts)
    : options_(opts) {
  if (opts.directory.empty()) {
    throw std::invalid_argument("dlock: file provider: option 'directory' must not be empty");
  }
  if (opts.monitor_period <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: file provider: option 'monitor_period' must be positive");
  }
  if (opts.retry_period <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: file provider: option 'retry_period' must be positive");
  }
  std::error_code ec;
  directory_ = std::filesystem::absolute(opts.directory, ec).lexically_normal();
  if (!directory_.has_filename()) directory_ = directory_.parent_path();
  std::filesystem::create_directories(directory_, ec);
  if (ec) {
    throw connection_error("dlock: file " + directory_.string() +
                           ": cannot create the lock directory: " + ec.message());
  }
  inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_) {
    throw connection_error("dlock: file " + directory_.string() +
                           ": inotify_init1: " + std::strerror(errno));
  }
  watch_directory(replacement_events);
}

file_backend::~file_backend() {
  // The thread must stop before the objects its handlers use go away, and the I/O objects
  // must go before the io_context they are registered with.
  io().stop();
  monitor_timer_.reset();
  events_.reset();
}

void file_backend::watch_directory(std::uint32_t events) {
  if (::inotify_add_watch(inotify_.get(), directory_.c_str(), events) < 0) {
    throw connection_error("dlock: file " + directory_.string() +
                           ": cannot watch the lock directory: " + std::strerror(errno));
  }
}

void file_backend::start() {
  // Weak: a provider dropped at once must be shut down by its owner's thread, not this one.
  boost::asio::post(io().executor(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    const int events_fd = ::fcntl(self->inotify_.get(), F_DUPFD_CLOEXEC, 0);
    if (events_fd < 0) {
      self->events().background_error(
          std::make_exception_ptr(connection_error(
              "dlock: file " + self->endpoint() + ": cannot watch the lock directory: " +
              std::strerror(errno) + "; waiters fall back to retry_period")));
    } else {
      self->events_.emplace(self->io().executor(), events_fd);
    }
    self->monitor_timer_.emplace(self->io().executor());
    self->wait_for_events();
    self->schedule_monitor();
  });
}

void file_backend::wait_for_events() {
  events_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [weak = weak_from_this()](boost::system::error_code ec) {
                        auto self = weak.lock();
                        if (!self || ec) return;
                        self->read_events();
                        self->wait_for_events();
                      });
}

void file_backend::read_events() {
  alignas(inotify_event) char buffer[16 * 1024];
  std::vector<std::string> touched;   // closed, removed or renamed: wake its waiters
  std::vector<std::string> replaced;  // removed or renamed: check its holders
  bool everything = false;
  for (;;) {
    const ssize_t got = ::read(inotify_.get(), buffer, sizeof buffer);
    if (got <= 0) break;
    for (char* at = buffer; at < buffer + got;) {
      const auto* event = reinterpret_cast<const inotify_event*>(at);
      at += sizeof(inotify_event) + event->len;
      if (event->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
        everything = true;
        continue;
      }
      if (event->len == 0) continue;
      std::string file(event->name);
      if (event->mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) replaced.push_back(file);
      touched.push_back(std::move(file));
    }
  }
  if (everything) {
    check_held(nullptr);
  } else {
    std::sort(replaced.begin(), replaced.end());
    replaced.erase(std::unique(replaced.begin(), replaced.end()), replaced.end());
    for (const std::string& file : replaced) check_held(&file);
  }
  std::vector<std::shared_ptr<file_acquire>> wake;
  if (everything) {
    for (auto& [file, list] : waiters_) {
      for (file_acquire* waiter : list) wake.push_back(waiter->shared_from_this());
    }
  } else {
    for (const std::string& file : touched) {
      if (auto it = waiters_.find(file); it != waiters_.end()) {
        for (file_acquire* waiter : it->second) wake.push_back(waiter->shared_from_this());
      }
    }
  }
  std::sort(wake.begin(), wake.end());
  wake.erase(std::unique(wake.begin(), wake.end()), wake.end());
  for (auto& waiter : wake) waiter->on_file_event();
}

void file_backend::check_held(const std::string* file) {
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(held_mutex_);
    auto check = [&](file_lease* lease) {
      if (lease->file_replaced()) lost.push_back(lease->lost_signal());
    };
    if (file) {
      auto [first, last] = held_.equal_range(*file);
      for (auto it = first; it != last; ++it) check(it->second);
    } else {
      for (auto& [name, lease] : held_) check(lease);
    }
  }
  // Outside held_mutex_: a stop_callback on a lost_token may release a handle at once.
  for (auto& signal : lost) signal.request_stop();
}

void file_backend::schedule_monitor() {
  monitor_timer_->expires_after(options_.monitor_period);
  monitor_timer_->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec) return;
    self->check_held(nullptr);
    self->schedule_monitor();
  });
}

std::string file_backend::lock_file_name(std::string_view name) const {
  return naming::escape_segment(name, max_escaped_bytes, true) + ".lock";
}

std::string file_backend::semaphore_file_name(std::string_view name) const {
  return naming::escape_segment(name, max_escaped_bytes, true) + ".semaphore";
}

std::optional<std::uint32_t> file_backend::current_count(const acquire_request& request) {
  file_acquire probe(shared_from_this(), request, [](std::exception_ptr, std::unique_ptr<lease>) {});
  return probe.current_count();
}

std::unique_ptr<lease> file_backend::try_acquire_inline(const acquire_request& request) {
  file_acquire attempt(shared_from_this(), request, [](std::exception_ptr, std::unique_ptr<lease>) {});
  return attempt.try_once();
}

std::shared_ptr<acquire_operation> file_backend::start_acquire(acquire_request request,
                                                               acquire_completion done) {
  auto operation =
      std::make_shared<file_acquire>(shared_from_this(), std::move(request), std::move(done));
  operation->start();
  return operation;
}

void file_backend::add_waiter(const std::string& file, file_acquire* waiter) {
  if (waiters_.empty()) watch_closes(true);
  waiters_[file].push_back(waiter);
}

void file_backend::watch_closes(bool on) {
  try {
    watch_directory(on ? replacement_events | close_events : replacement_events);
  } catch (...) {
    // Waiters still wake every retry_period; say why they are slow.
    events().background_error(std::current_exception());
  }
}

void file_backend::remove_waiter(const std::string& file, file_acquire* waiter) {
  auto it = waiters_.find(file);
  if (it == waiters_.end()) return;
  std::erase(it->second, waiter);
  if (it->second.empty()) waiters_.erase(it);
  if (waiters_.empty()) watch_closes(false);
}

void file_backend::add_held(const std::string& file, file_lease* lease) {
  std::lock_guard lock(held_mutex_);
  held_.emplace(file, lease);
}

void file_backend::remove_held(const std::string& file, file_lease* lease) {
  std::lock_guard lock(held_mutex_);
  auto [first, last] = held_.equal_range(file);
  for (auto it = first; it != last; ++it) {
    if (it->second == lease) {
      held_.erase(it);
      return;
    }
  }
}

file_lease::file_lease(std::shared_ptr<file_backend> backend, std::filesystem::path path,
                       std::string file, unique_fd fd, bool exclusive,
                       std::uint64_t fencing_token)
    : lease(fencing_token),
      backend_(std::move(backend)),
      path_(std::move(path)),
      file_(std::move(file)),
      fd_(std::move(fd)),
      exclusive_(exclusive) {
  backend_->add_held(file_, this);
}

file_lease::~file_lease() {
  if (fd_) {
    backend_->remove_held(file_, this);
    unlock_and_close();
  }
}

// Unlocks before closing: the close wakes waiters (inotify), and they must find it unlocked.
void file_lease::unlock_and_close() noexcept {
  ::flock(fd_.get(), LOCK_UN);
  fd_.reset();
}

void file_lease::release() {
  if (!fd_) return;
  backend_->remove_held(file_, this);
  // Unlinking while still holding the lock is what makes removal safe: a contender that
  // opened the old file and locks it after us finds that the path no longer names it.
  if (backend_->settings().remove_files_on_release && exclusive_ && !lost()) {
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
        std::make_exception_ptr(connection_error("dlock: file " + backend_->endpoint() + ": " +
                                                 failure.what + " while checking a held lock")));
    return false;
  }
}

}  // namespace dlock::file::detail
