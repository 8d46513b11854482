#include "client_pump.hpp"

#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

namespace dlock::zookeeper::detail {

namespace {

using clock = std::chrono::steady_clock;

// How deep this thread is in a use of the client: a completion that makes a call must queue
// it (the lock is held, and the client is in the middle of its processing).
thread_local int inside_client = 0;

struct inside_client_use {
  inside_client_use() { ++inside_client; }
  ~inside_client_use() { --inside_client; }
  inside_client_use(const inside_client_use&) = delete;
  inside_client_use& operator=(const inside_client_use&) = delete;
};

clock::duration duration_of(const timeval& tv) {
  return std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
}

// Expired, or refused its credentials: the client will not connect again with this handle.
bool gone_for_good(zhandle_t* handle) {
  const int state = zoo_state(handle);
  return state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

bool has_bytes_to_read(int fd) {
  int available = 0;
  return fd >= 0 && ::ioctl(fd, FIONREAD, &available) == 0 && available > 0;
}

}  // namespace

client_pump::client_pump(boost::asio::any_io_executor executor,
                         std::function<bool()> on_io_thread)
    : executor_(std::move(executor)), on_io_thread_(std::move(on_io_thread)), timer_(executor_) {}

client_pump::~client_pump() { unbind(); }

void client_pump::start(zhandle_t* handle) {
  {
    std::lock_guard lock(client_mutex_);
    handle_ = handle;
  }
  if (on_io_thread_()) return arm();
  boost::asio::post(executor_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->arm();
  });
}

zhandle_t* client_pump::stop() noexcept {
  zhandle_t* handle = nullptr;
  {
    std::lock_guard lock(client_mutex_);
    handle = std::exchange(handle_, nullptr);
  }
  unbind();
  timer_due_.reset();
  timer_.cancel();
  return handle;
}

void client_pump::submit(client_call call) {
  if (inside_client == 0) {
    // The call sends the request at once, unless the socket is full or not connected yet.
    const bool io_thread = on_io_thread_();
    bool rearm = io_thread;
    {
      std::unique_lock lock(client_mutex_);
      const inside_client_use use;
      make_queued_calls(lock);  // first: they were asked for earlier
      call(handle_);
      if (!io_thread && handle_) {
        // Another thread (a blocking release) wakes the io thread only if that thread's waits
        // no longer fit (the client could not send it all, or reconnected); the answer wakes
        // it anyway.
        int fd = -1;
        int interest = 0;
        timeval tv{};
        const std::uint64_t changes = socket_changes_.load();
        if (zookeeper_interest(handle_, &fd, &interest, &tv) != ZOK) socket_changes_.fetch_add(1);
        rearm = (interest & ZOOKEEPER_WRITE) || fd != known_fd_.load() ||
                socket_changes_.load() != changes;
      }
    }
    if (!rearm) return;
    if (io_thread) return arm();
    boost::asio::post(executor_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->arm();
    });
    return;
  }
  // Inside the client's processing: queued, and made right after it.
  bool first = false;
  {
    std::lock_guard lock(client_mutex_);
    queued_.push_back(std::move(call));
    first = queued_.size() == 1;
  }
  if (!first) return;
  boost::asio::post(executor_, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    {
      std::unique_lock lock(self->client_mutex_);
      const inside_client_use use;
      self->make_queued_calls(lock);
    }
    self->arm();
  });
}

void client_pump::make_queued_calls(std::unique_lock<std::mutex>&) {
  while (!queued_.empty()) {
    client_call call = std::move(queued_.front());
    queued_.pop_front();
    call(handle_);
  }
}

void client_pump::help(std::chrono::milliseconds slice) {
  {
    std::unique_lock lock(client_mutex_, std::try_to_lock);
    // Somebody is reading answers now (the io thread, usually): ours comes that way.
    if (!lock || !handle_) return;
    const inside_client_use use;
    make_queued_calls(lock);
    poll_once(slice);
  }
  // The io thread's waits may be on a socket that changed meanwhile, or miss a request the
  // client could not send yet.
  boost::asio::post(executor_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->arm();
  });
}

bool client_pump::run_until(const std::function<bool()>& done, clock::time_point deadline) {
  constexpr auto slice = std::chrono::milliseconds(10);
  while (!done()) {
    const clock::time_point now = clock::now();
    if (now >= deadline) break;
    std::unique_lock lock(client_mutex_);
    if (!handle_) break;
    const inside_client_use use;
    make_queued_calls(lock);
    poll_once(std::min<clock::duration>(slice, deadline - now));
  }
  arm();
  return done();
}

void client_pump::poll_once(clock::duration limit) {
  int fd = -1;
  int interest = 0;
  timeval tv{};
  const int rc = zookeeper_interest(handle_, &fd, &interest, &tv);
  if (rc != ZOK) {
    socket_changes_.fetch_add(1);
    fd = -1;
  }
  if (gone_for_good(handle_)) return;
  const auto wait = std::min(duration_of(tv), limit);
  // Rounded up: a wait of 0.4 ms must not become a busy loop of zero-timeout polls.
  const auto millis = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  pollfd watched{.fd = fd, .events = 0, .revents = 0};
  if (interest & ZOOKEEPER_READ) watched.events |= POLLIN;
  if (interest & ZOOKEEPER_WRITE) watched.events |= POLLOUT;
  if (::poll(&watched, fd >= 0 ? 1 : 0, static_cast<int>(millis)) <= 0) return;
  int events = 0;
  if (watched.revents & (POLLIN | POLLERR | POLLHUP)) events |= ZOOKEEPER_READ;
  if (watched.revents & (POLLOUT | POLLERR | POLLHUP)) events |= ZOOKEEPER_WRITE;
  if (events) process(events, fd);
}

void client_pump::unbind() noexcept {
  ++generation_;
  reading_ = false;
  writing_ = false;
  bound_fd_ = -1;
  known_fd_.store(-1);
  if (!socket_) return;
  // The client owns the socket (and may have closed it already): never let Asio close it.
  socket_->release();
  socket_.reset();
}

void client_pump::arm() {
  int fd = -1;
  int interest = 0;
  timeval tv{};
  int rc = ZOK;
  {
    std::unique_lock lock(client_mutex_);
    if (!handle_) return unbind();
    const inside_client_use use;
    rc = zookeeper_interest(handle_, &fd, &interest, &tv);
    if (rc != ZOK) socket_changes_.fetch_add(1);
    // Expired or refused for good: the session event is on its way, and the session replaces
    // the handle.
    if (gone_for_good(handle_)) return unbind();
  }
  if (rc != ZOK) {
    // The client closed the socket (a timeout, a refused connect): it opens the next one
    // when asked again, after `tv`.
    fd = -1;
    interest = 0;
  }
  const std::uint64_t changes = socket_changes_.load();
  if (fd != bound_fd_ || changes != bound_changes_) {
    unbind();
    bound_changes_ = changes;
    if (fd >= 0) {
      socket_.emplace(executor_, fd);
      bound_fd_ = fd;
    }
    known_fd_.store(bound_fd_);
  }
  if (socket_) {
    if (interest & ZOOKEEPER_READ) wait_for(ZOOKEEPER_READ);
    if (interest & ZOOKEEPER_WRITE) wait_for(ZOOKEEPER_WRITE);
  }
  // The timer only ever moves earlier: one that fires early costs a zookeeper_interest(),
  // which is cheaper than resetting the timer after every answer (the ping is due a third of
  // the session timeout after the last request, so each request moves it later).
  const clock::time_point due = clock::now() + duration_of(tv);
  if (timer_due_ && *timer_due_ <= due) return;
  timer_due_ = due;
  timer_.expires_at(due);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec == boost::asio::error::operation_aborted) return;
    self->timer_due_.reset();
    self->arm();
  });
}

void client_pump::wait_for(int event) {
  bool& waiting = event == ZOOKEEPER_READ ? reading_ : writing_;
  if (waiting) return;
  waiting = true;
  const auto wait = event == ZOOKEEPER_READ ? boost::asio::posix::stream_descriptor::wait_read
                                            : boost::asio::posix::stream_descriptor::wait_write;
  socket_->async_wait(wait, [weak = weak_from_this(), generation = generation_,
                             event](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || generation != self->generation_) return;
    (event == ZOOKEEPER_READ ? self->reading_ : self->writing_) = false;
    if (!ec) self->on_ready(generation, event);
  });
}

void client_pump::on_ready(std::uint64_t generation, int events) {
  if (generation != generation_) return;
  {
    std::unique_lock lock(client_mutex_);
    if (!handle_) return;
    const inside_client_use use;
    process(events, bound_fd_);
  }
  arm();
}

void client_pump::process(int events, int fd) {
  if (zookeeper_process(handle_, events) != ZOK) {
    socket_changes_.fetch_add(1);
    return;
  }
  if (!(events & ZOOKEEPER_READ)) return;
  while (has_bytes_to_read(fd)) {
    if (zookeeper_process(handle_, ZOOKEEPER_READ) != ZOK) {
      socket_changes_.fetch_add(1);
      return;
    }
  }
}

}  // namespace dlock::zookeeper::detail
