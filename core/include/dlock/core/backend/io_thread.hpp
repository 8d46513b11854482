// dlock/core/backend/io_thread.hpp: an io_context with its own thread (for backend implementers).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

namespace dlock {

/// An io_context run by one thread it owns: a provider's default executor.
///
/// The thread, and Asio's reactor (an epoll, a timerfd and an eventfd), start at the first call
/// to executor(), since whoever asks for the executor is about to give it work (every handler,
/// timer and I/O object needs one), not with the io_thread: a provider that is made and used
/// inline only (the dlock command's file lock) never pays for a thread or descriptors it does
/// not use.
///
/// Destruction stops the context and joins the thread; if it happens on that very thread
/// (the last handle released inside a completion handler), the thread is detached and
/// finishes once the handler returns, and exit() waits for that before it destroys static
/// objects.
class io_thread {
 public:
  /// Makes the context, but neither its reactor nor its thread (executor() does).
  io_thread();
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  /// Calls stop().
  ~io_thread();

  /// Stops the context and ends the thread: joins it, or, when called on it, lets it end after
  /// the current handler (detached; exit() waits for it). The context itself lives until destruction, so
  /// I/O objects bound to it may still be destroyed after stop(). Idempotent.
  void stop();

  /// The context's executor; makes the reactor and starts the thread on the first call (not
  /// after stop()). Throws dlock::error when the process has no descriptor or thread left
  /// for them.
  boost::asio::any_io_executor executor() const;
  bool running_in_this_thread() const noexcept;

 private:
  void start_thread() const;
  void make_reactor() const;

  std::shared_ptr<boost::asio::io_context> context_;
  mutable std::atomic<bool> started_{false};  // the thread was started, or stop() was called
  mutable std::mutex start_mutex_;
  mutable std::thread thread_;
  // Set by the thread as its last statement, so that whoever joins it later knows it may.
  std::shared_ptr<std::atomic<bool>> finished_;
};

}  // namespace dlock
