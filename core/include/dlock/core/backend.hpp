// dlock/core/backend.hpp: the interface a backend implements (for backend implementers).
//
// A backend knows how to make one acquire attempt and how to wait at its server. Everything
// that is the same for every backend lives in core and is not repeated here: timeouts, stop
// requests, the in-process first-level queue, handles, async completion, error hooks.
// Users never call a backend; they go through dlock::provider and the primitives.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/core/detail/unique_function.hpp>
#include <dlock/core/lease.hpp>

namespace dlock {

/// The three primitives. A name is one resource per primitive: the lock "a" and the
/// semaphore "a" are unrelated, but the lock "a" and the reader-writer lock "a" may share
/// a backend resource where the backend documents it (the file backend does, as flock(1)).
enum class primitive { lock, reader_writer_lock, semaphore };

/// exclusive: locks, writers and semaphore slots; shared: readers.
enum class lock_mode { exclusive, shared };

/// What a backend is asked to acquire.
struct acquire_request {
  primitive kind = primitive::lock;
  std::string name;                   ///< validated by core: non-empty UTF-8, <= 1024 bytes
  lock_mode mode = lock_mode::exclusive;
  std::uint32_t max_count = 1;        ///< slots of a semaphore; 1 otherwise
  /// false: make exactly one attempt and complete (a zero timeout). true: wait until granted
  /// or cancelled; core cancels the wait when the timeout passes or a stop is requested.
  bool wait = false;
  /// When core will cancel a waiting request (time_point::max() for none). Backends may use
  /// it to bound a server-side wait (e.g. Postgres lock_timeout); core cancels regardless.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

/// Receives errors that have no caller to be thrown to (see dlock::error_handler).
using background_error_handler = std::function<void(std::exception_ptr)>;

/// Hands `error` to `handler`, or prints its message as one line to stderr when `handler`
/// is empty. Never throws. Backends use it for errors of their monitors.
void report_background_error(const background_error_handler& handler,
                             std::exception_ptr error) noexcept;

/// Completes an acquire exactly once: (nullptr, lease) granted; (nullptr, nullptr) not
/// granted (one attempt failed, or the wait was cancelled); (error, nullptr) failed.
using acquire_completion =
    detail::unique_function<void(std::exception_ptr, std::unique_ptr<lease>)>;

/// An acquire in progress at a backend.
class acquire_operation {
 public:
  virtual ~acquire_operation() = default;
  /// Asks the operation to stop waiting: it removes whatever it left at the server (queued
  /// node, waiter, pending query), then completes with no lease, or with the lease if the
  /// grant won the race. Thread-safe; may be called more than once and after completion.
  virtual void cancel() noexcept = 0;
};

/// What a backend tells core about its work, for the provider's counters and error hook.
/// Thread-safe; never throws.
class backend_events {
 public:
  virtual ~backend_events() = default;
  /// An acquire found the lock taken and now waits for it.
  virtual void acquire_waiting() noexcept = 0;
  /// A lease could not be extended (leased backends); the lease may still be valid.
  virtual void extension_failed() noexcept = 0;
  /// An error with no caller to throw to (a monitor, an extension): counted, then handed to
  /// the provider's error hook.
  virtual void background_error(std::exception_ptr error) noexcept = 0;
};

/// A backend instance: one per provider.
///
/// Thread safety: start_acquire() may be called from any thread concurrently.
class backend {
 public:
  virtual ~backend() = default;

  /// The backend's short name used in messages and URLs: "file", "redis", ...
  virtual std::string_view scheme() const noexcept = 0;

  /// Where the backend is, for messages: a directory, host:port list. Never a password.
  virtual std::string endpoint() const = 0;

  /// The executor on which core runs timers and, by default, completion handlers.
  virtual boost::asio::any_io_executor executor() const = 0;

  /// True when the calling thread is one the backend needs in order to make progress, so a
  /// blocking (sync) acquire from it would deadlock.
  virtual bool running_in_this_thread() const noexcept = 0;

  /// Starts an acquire. `done` must not run inside this call (post it), and runs exactly
  /// once. Returns the operation so core can cancel it.
  /// Throws: only std::invalid_argument for a request this backend cannot represent.
  virtual std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                           acquire_completion done) = 0;

  /// True when try_acquire_inline() is offered: one attempt cheap enough to make on the
  /// caller's thread (local system calls, no network round trip). Core then settles an
  /// uncontended blocking acquire without a thread hop.
  virtual bool acquires_inline() const noexcept { return false; }

  /// Free slots of the semaphore `request` names, now: max_count minus the slots held, never
  /// negative. std::nullopt when this backend cannot tell (the default).
  /// Throws what an acquire of `request` would (connection_error, std::invalid_argument).
  virtual std::optional<std::uint32_t> free_slots(const acquire_request& request);

  /// Called once by core when it takes the backend over, before any acquire.
  void attach_events(std::shared_ptr<backend_events> events) noexcept;

  /// Makes one non-waiting attempt on the calling thread. Returns the lease, or nullptr when
  /// the lock is taken. Throws what start_acquire's completion would fail with
  /// (connection_error, std::invalid_argument). Requires: acquires_inline(); request.wait
  /// is false.
  virtual std::unique_ptr<lease> try_acquire_inline(const acquire_request& request);

  /// Where the backend (and its operations and leases) report waits, extension failures and
  /// background errors: the provider's, or a sink that only prints errors until core attaches
  /// it.
  backend_events& events() const noexcept;

 private:
  std::shared_ptr<backend_events> events_;
};

}  // namespace dlock
