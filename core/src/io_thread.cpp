#include <dlock/core/backend/io_thread.hpp>

#include <exception>
#include <iostream>
#include <string>
#include <system_error>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>

#include <dlock/core/errors.hpp>

#include "orphan_threads.hpp"

namespace dlock {

namespace {

[[noreturn]] void throw_cannot_start(const std::exception& cause) {
  throw error(std::string("dlock: cannot start a provider's io thread: ") + cause.what() +
              " (out of file descriptors or threads? see docs/scaling.md)");
}

}  // namespace

io_thread::io_thread()
    : context_(std::make_shared<boost::asio::io_context>(1)),
      finished_(std::make_shared<std::atomic<bool>>(false)) {}

void io_thread::make_reactor() const {
  try {
    // Asio makes its reactor (an epoll, a timerfd and an eventfd descriptor) with the first
    // timer or socket, which would be somewhere deep in a backend; making it here, with the
    // thread, reports a process out of descriptors as a dlock::error at the executor() that
    // needed it. Not with the io_thread: a provider used inline only (the dlock command's
    // file lock) never pays for the five system calls.
    boost::asio::steady_timer{*context_};
  } catch (const boost::system::system_error& e) {
    throw_cannot_start(e);
  } catch (const std::system_error& e) {
    throw_cannot_start(e);
  }
}

void io_thread::start_thread() const {
  std::lock_guard lock(start_mutex_);
  if (started_.load(std::memory_order_relaxed)) return;
  make_reactor();
  try {
    thread_ = std::thread([context = context_, finished = finished_]() mutable {
      auto work = boost::asio::make_work_guard(*context);
      // A handler that throws would otherwise end the thread and the process with it; the
      // handlers are the user's completion handlers, so report and keep serving the others.
      while (!context->stopped()) {
        try {
          context->run();
        } catch (const std::exception& e) {
          std::cerr << "dlock: exception escaped a completion handler: " << e.what() << '\n';
        } catch (...) {
          std::cerr << "dlock: unknown exception escaped a completion handler\n";
        }
      }
      // The context goes with the last owner, which may be this thread: before the flag.
      work.reset();
      context.reset();
      detail::say_finished(*finished);
    });
  } catch (const std::system_error& e) {
    throw_cannot_start(e);
  }
  started_.store(true, std::memory_order_release);
}

io_thread::~io_thread() { stop(); }

void io_thread::stop() {
  {
    // A later executor() must not start a thread that nobody would join.
    std::lock_guard lock(start_mutex_);
    started_.store(true, std::memory_order_release);
  }
  context_->stop();
  if (!thread_.joinable()) return;
  if (running_in_this_thread()) {
    // The thread holds the context and ends after the current handler.
    detail::detach_until_exit(std::move(thread_), finished_);
  } else {
    thread_.join();
  }
}

boost::asio::any_io_executor io_thread::executor() const {
  if (!started_.load(std::memory_order_acquire)) start_thread();
  return context_->get_executor();
}

bool io_thread::running_in_this_thread() const noexcept {
  return context_->get_executor().running_in_this_thread();
}

}  // namespace dlock
