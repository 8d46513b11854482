#include "backend.hpp"

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

#include "acquire.hpp"
#include "lease.hpp"

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
// A proclaim or withdraw writes the election file; a release closes it after writing (its
// holder opened it for writing). Observers' own reads close it unwritten, which is left out:
// each would wake every observer to read again. Watched while an election is observed.
constexpr std::uint32_t leader_events = IN_MODIFY | IN_CLOSE_WRITE;

}  // namespace

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
    throw connection_error(message("cannot create the lock directory: " + ec.message()));
  }
}

file_backend::~file_backend() {
  // The thread must stop before the objects its handlers use go away, and the I/O objects
  // must go before the io_context they are registered with.
  io().stop();
  monitor_timer_.reset();
  events_.reset();
}

void file_backend::arm_monitor() {
  // Weak: a provider dropped at once must be shut down by its owner's thread, not this one.
  boost::asio::post(executor(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->monitor_timer_.emplace(self->executor());
    self->schedule_monitor();
  });
}

void file_backend::start_watching() {
  if (inotify_) return;
  try {
    unique_fd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!inotify) throw_watch_error("inotify_init1");
    const int events_fd = ::fcntl(inotify.get(), F_DUPFD_CLOEXEC, 0);
    if (events_fd < 0) throw_watch_error("cannot watch the lock directory");
    events_.emplace(executor(), events_fd);
    inotify_ = std::move(inotify);
  } catch (...) {
    events_.reset();
    // Waiters still wake every retry_period; say why they are slow.
    events().background_error(std::current_exception());
    return;
  }
  wait_for_events();
}

void file_backend::throw_watch_error(const char* what) const {
  throw connection_error(message(std::string(what) + ": " + std::strerror(errno) +
                                 "; waiters fall back to retry_period"));
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
  std::vector<std::string> rewritten;  // written, closed after writing, removed or renamed
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
      if (event->mask & (leader_events | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) {
        rewritten.push_back(file);
      }
      if (event->mask & (close_events | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) {
        touched.push_back(std::move(file));
      }
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
  tell_leader_watches(everything ? nullptr : &rewritten);
}

void file_backend::tell_leader_watches(const std::vector<std::string>* files) {
  std::vector<std::shared_ptr<watch_callback>> told;
  {
    std::lock_guard lock(leader_watches_mutex_);
    for (const auto& [file, watch] : leader_watches_) {
      if (!files || std::find(files->begin(), files->end(), file) != files->end()) {
        told.push_back(watch);
      }
    }
  }
  for (const auto& watch : told) (*watch)();
}

std::shared_ptr<void> file_backend::watch_leader(const std::string& file,
                                                 std::function<void()> changed) {
  auto watch = std::make_shared<watch_callback>(std::move(changed));
  {
    std::lock_guard lock(leader_watches_mutex_);
    leader_watches_.emplace(file, watch);
  }
  // Once the directory is watched, a read: a write before that had nothing to see it.
  boost::asio::post(executor(), [weak = weak_from_this(), watch] {
    auto self = weak.lock();
    if (!self) return;
    self->start_watching();
    self->update_watch_mask();
    (*watch)();
  });
  return std::shared_ptr<void>(watch.get(), [weak = weak_from_this(), file, watch](void*) {
    watch->stop();
    auto self = weak.lock();
    if (!self) return;
    {
      std::lock_guard lock(self->leader_watches_mutex_);
      auto [first, last] = self->leader_watches_.equal_range(file);
      for (auto it = first; it != last; ++it) {
        if (it->second == watch) {
          self->leader_watches_.erase(it);
          break;
        }
      }
    }
    boost::asio::post(self->executor(), [weak] {
      if (auto self = weak.lock()) self->update_watch_mask();
    });
  });
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

namespace {

// Every file of a name is its escaped name and a suffix of its own, so no two names and no
// two primitives of one name share a file by accident.
std::string file_of(std::string_view name, std::string_view suffix) {
  std::string file = naming::escape_segment(name, max_escaped_bytes, true);
  file += suffix;
  return file;
}

}  // namespace

std::string file_backend::path_of(std::string_view file) const {
  const std::string& directory = directory_.native();
  std::string path;
  path.reserve(directory.size() + 1 + file.size());
  path += directory;
  if (path.empty() || path.back() != '/') path += '/';
  path += file;
  return path;
}

std::string file_backend::lock_file_name(std::string_view name) const {
  return file_of(name, ".lock");
}

std::string file_backend::semaphore_file_name(std::string_view name) const {
  return file_of(name, ".semaphore");
}

std::string file_backend::gate_file_name(std::string_view name) const {
  return file_of(name, ".upgrade-gate");
}

std::string file_backend::election_file_name(std::string_view name) const {
  return file_of(name, ".election");
}

std::string file_backend::writers_file_name(std::string_view name) const {
  return file_of(name, ".writers");
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
  const bool first = waiters_.empty();
  waiters_[file].push_back(waiter);
  if (first) {
    start_watching();
    update_watch_mask();
  }
}

void file_backend::update_watch_mask() {
  if (!inotify_) return;
  std::uint32_t mask = replacement_events;
  if (!waiters_.empty()) mask |= close_events;
  {
    std::lock_guard lock(leader_watches_mutex_);
    if (!leader_watches_.empty()) mask |= leader_events;
  }
  try {
    if (::inotify_add_watch(inotify_.get(), directory_.c_str(), mask) < 0) {
      throw_watch_error("cannot watch the lock directory");
    }
  } catch (...) {
    events().background_error(std::current_exception());
  }
}

void file_backend::remove_waiter(const std::string& file, file_acquire* waiter) {
  auto it = waiters_.find(file);
  if (it == waiters_.end()) return;
  std::erase(it->second, waiter);
  if (it->second.empty()) waiters_.erase(it);
  if (waiters_.empty()) update_watch_mask();
}

void file_backend::add_held(const std::string& file, file_lease* lease) {
  bool first = false;
  {
    std::lock_guard lock(held_mutex_);
    held_.emplace(file, lease);
    first = !monitor_armed_ && !caller_checks_;
    monitor_armed_ = monitor_armed_ || first;
  }
  if (first) arm_monitor();
}

std::optional<std::chrono::nanoseconds> file_backend::check_held_by_caller() {
  std::lock_guard lock(held_mutex_);
  caller_checks_ = true;
  return options_.monitor_period;
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

}  // namespace dlock::file::detail
