// Private to dlock::zookeeper: drives the C client's single-threaded build from the provider's
// io thread.
//
// That client has no thread of its own: zookeeper_interest() says which socket it wants to
// read or write and by when it must be asked again (pings, a connection that went silent, the
// next server to try), and zookeeper_process() reads one answer, sends what is queued and runs
// the completions and watchers. The pump waits for the socket and for that time with Asio on
// the io thread, so every answer is read, and every completion runs, where the recipes run:
// a grant wakes one thread of the provider, not the three of the threaded client
// (docs/design/zookeeper-single-threaded-client.md).
//
// The client has no locks, so the pump's lock serializes every use of it. The io thread holds
// it to make calls and read answers; another thread holds it to make a call (a blocking
// release's delete goes out from the releasing thread). A thread that waits for an answer
// reads answers itself while the io thread is held up elsewhere (a user's handler), so that it
// never waits on a thread it does not control (help()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "c_client.hpp"

namespace dlock::zookeeper::detail {

class client_pump final : public std::enable_shared_from_this<client_pump> {
 public:
  /// A use of the client, under the pump's lock; the handle is null when there is none.
  using client_call = std::function<void(zhandle_t*)>;

  /// `on_io_thread` says whether the calling thread is the io thread of `executor`.
  client_pump(boost::asio::any_io_executor executor, std::function<bool()> on_io_thread);
  /// Gives the socket back to the client without closing it.
  ~client_pump();

  bool on_io_thread() const { return on_io_thread_(); }
  /// Starts driving `handle` (made by zookeeper_init, used by no one yet). Any thread.
  void start(zhandle_t* handle);
  /// Stops driving and returns the handle, for zookeeper_close: on the io thread, or once it
  /// has stopped. Idempotent (then nullptr).
  zhandle_t* stop() noexcept;
  /// Makes `call` at once, on any thread (another thread wakes the io thread only when its
  /// waits must change). Calls made inside the client's processing (a completion) are queued,
  /// and made right after it.
  void submit(client_call call);
  /// For a thread that waits for an answer, not the io thread: when nobody else is reading
  /// the client's answers right now, makes the queued calls and reads answers for up to
  /// `slice`. Returns at once when the io thread is at it.
  void help(std::chrono::milliseconds slice);
  /// On the io thread: reads the client's answers right here until `done()` or `deadline`,
  /// for a blocking call made on that thread. Returns done().
  bool run_until(const std::function<bool()>& done,
                 std::chrono::steady_clock::time_point deadline);

 private:
  /// zookeeper_interest(), then waits for what it asked (the socket, the time). Io thread.
  void arm();
  /// Waits for the socket to be readable (ZOOKEEPER_READ) or writable, unless it does already.
  void wait_for(int event);
  void on_ready(std::uint64_t generation, int events);
  /// Makes the queued calls, with client_mutex_ held.
  void make_queued_calls(std::unique_lock<std::mutex>& held);
  /// Reads every answer the socket holds, with client_mutex_ held: zookeeper_process() takes
  /// one at a time, and the reactor, edge-triggered, says nothing of what is left.
  void process(int events, int fd);
  /// One round without Asio: asks the client what it waits for, polls for it up to `limit`,
  /// and lets it process what came. With client_mutex_ held.
  void poll_once(std::chrono::steady_clock::duration limit);
  /// Forgets the socket Asio waits on (the client closed it, or may have). Io thread.
  void unbind() noexcept;

  boost::asio::any_io_executor executor_;
  std::function<bool()> on_io_thread_;

  // The client, and what only its users see: under client_mutex_.
  std::mutex client_mutex_;
  zhandle_t* handle_ = nullptr;
  std::deque<client_call> queued_;
  // Counts the times a use of the client may have closed its socket; the io thread rebinds
  // when it moved (the next socket may get the same number).
  std::atomic<std::uint64_t> socket_changes_{0};

  // Asio's side: io thread only.
  std::optional<boost::asio::posix::stream_descriptor> socket_;
  int bound_fd_ = -1;
  // bound_fd_, for the other threads' calls: a socket Asio does not wait on needs the io thread.
  std::atomic<int> known_fd_{-1};
  std::uint64_t bound_changes_ = 0;
  // Tells a wait's handler, which may run after the socket or the handle changed, that it is
  // not the current one.
  std::uint64_t generation_ = 0;
  bool reading_ = false;
  bool writing_ = false;
  boost::asio::steady_timer timer_;
  std::optional<std::chrono::steady_clock::time_point> timer_due_;
};

}  // namespace dlock::zookeeper::detail
