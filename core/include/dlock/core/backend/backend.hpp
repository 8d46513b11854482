// dlock/core/backend/backend.hpp: the interface a backend implements (for backend implementers).
//
// A backend knows how to make one acquire attempt and how to wait at its server. Everything
// that is the same for every backend lives in core and is not repeated here: timeouts, stop
// requests, the in-process first-level queue, handles, async completion, error hooks, the
// thread that runs its executor and the wording of its error messages. Users never call a
// backend; they go through dlock::provider and the primitives. The rest of the kit for
// backend authors is beside this file: lease.hpp (a grant), blocking_call.hpp (a blocking
// call answered on the backend's thread), naming.hpp (escaping names into keys),
// provider_url.hpp (URLs and make_provider's scheme registry) and io_thread.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/core/backend/inline_acquirer.hpp>
#include <dlock/core/backend/io_thread.hpp>
#include <dlock/core/backend/lease.hpp>
#include <dlock/core/backend/resource_kind.hpp>
#include <dlock/core/detail/unique_function.hpp>
#include <dlock/core/errors.hpp>
#include <dlock/core/health.hpp>
#include <dlock/core/inspection.hpp>
#include <dlock/core/lock_kind.hpp>

namespace dlock {

class election_board;
class caller_loss_check;

/// What a backend is asked to acquire.
struct acquire_request {
  resource_kind kind = resource_kind::lock;
  std::string name;                   ///< validated by core: non-empty UTF-8, <= 1024 bytes
  lock_mode mode = lock_mode::exclusive;
  std::uint32_t max_count = 1;        ///< slots of a semaphore; 1 otherwise
  /// false: make exactly one attempt and complete (a zero timeout). true: wait until granted
  /// or cancelled; core cancels the wait when the timeout passes or a stop is requested.
  bool wait = false;
  /// When core will cancel a waiting request (time_point::max() for none). Backends may use
  /// it to bound a server-side wait (e.g. Postgres lock_timeout); core cancels regardless.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Who asks (validated by core): the backend stores it with the grant where it can, for
  /// inspect() (docs/observability.md). Empty only for requests core makes without one.
  std::string owner;
  /// A lock's minimum hold (zero for none, and for every other kind): a grant keeps the name
  /// at least this long from the grant, by the server's clock (the machine's for local
  /// backends), whenever it is released and also when its holder dies; every acquire of the
  /// name respects it. Only asked of a backend whose min_hold_refusal() is empty.
  std::chrono::nanoseconds min_hold{0};
};

/// Hands `error` to `handler`, or prints its message as one line to stderr when `handler`
/// is empty. Never throws. Backends use it for errors of their monitors.
void report_background_error(const error_handler& handler,
                             std::exception_ptr error) noexcept;

/// Completes an acquire exactly once: (nullptr, lease) granted; (nullptr, nullptr) not
/// granted (one attempt failed, or the wait was cancelled); (error, nullptr) failed.
using acquire_completion =
    detail::unique_function<void(std::exception_ptr, std::unique_ptr<lease>)>;

/// An acquire in progress at a backend.
class acquire_operation {
 public:
  virtual ~acquire_operation() = default;
  /// Withdraws the attempt: the operation removes whatever it left at the server (queued
  /// node, waiter, pending query), then completes: with no lease, with the lease if the grant
  /// won the race, or with an error. It completes once the server confirmed the withdrawal or
  /// once it gave up on the server (the connection lost or abandoned), never sooner: a caller
  /// that hears early could end its process before the withdrawal left. Core answers a
  /// stopped caller after a short grace all the same, and gives back (destroys) a lease that
  /// completes after that. Thread-safe; may be called more than once and after completion.
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
  /// A connection or session that was lost is established again (for metrics).
  virtual void reconnected() noexcept = 0;
  /// An error with no caller to throw to (a monitor, an extension): counted, then handed to
  /// the provider's error hook.
  virtual void background_error(std::exception_ptr error) noexcept = 0;
};

/// A backend instance: one per provider.
///
/// Life: the provider's constructor attaches its counters and error hook (attach_events),
/// then calls start(); the backend lives until the provider and every lock, handle and
/// operation of it are gone. A derived destructor first calls io().stop(), so that no handler
/// of the backend's thread runs while the derived members are destroyed.
///
/// Thread safety: start_acquire() may be called from any thread concurrently.
class backend {
 public:
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;
  virtual ~backend();

  /// The backend's short name used in messages and URLs: "file", "redis", ...
  virtual std::string_view scheme() const noexcept = 0;

  /// Where the backend is, for messages: a directory, host:port list. Never a password.
  virtual std::string endpoint() const = 0;

  /// The executor of the backend's own thread, on which core runs timers and, by default,
  /// completion handlers.
  boost::asio::any_io_executor executor() const { return io_.executor(); }

  /// The executor on which core runs an acquire's own steps (its strand, its timeout timer)
  /// and so takes the backend's completion. By default executor(). A backend whose acquires
  /// complete on a thread of its own may name that thread's executor: every completion is
  /// then spared a thread switch (a wake-up) before the caller's. Core runs only its own
  /// bookkeeping there and posts users' handlers to their executors, but its continuations
  /// may call into the backend from that thread (a release, the next acquire of a chain), so
  /// running_in_this_thread() must cover it.
  virtual boost::asio::any_io_executor acquire_executor() const { return executor(); }

  /// True when the calling thread is one the backend needs in order to make progress, so a
  /// blocking (sync) call from it would deadlock. By default: the thread of executor().
  virtual bool running_in_this_thread() const noexcept { return io_.running_in_this_thread(); }

  /// Starts the backend's background work (sessions, monitors, keepalives). Core calls it
  /// once, after attach_events(), so the first report of that work already reaches the
  /// provider's counters and error hook. Throws what the provider's constructor documents
  /// (connection_error for a backend that connects eagerly).
  virtual void start() {}

  /// Starts an acquire. `done` must not run inside this call (post it), and runs exactly
  /// once. Returns the operation so core can cancel it.
  /// Throws: only std::invalid_argument for a request this backend cannot represent.
  virtual std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                           acquire_completion done) = 0;

  /// The backend's attempt (and wait) on the caller's thread, or nullptr when it has none
  /// (the default): inline_acquirer.hpp. Core asks for each acquire, so a backend may offer
  /// it in one configuration only (Redis on one server).
  virtual inline_acquirer* as_inline_acquirer() noexcept { return nullptr; }

  /// Throws std::invalid_argument when this backend's configuration cannot hold `name` as a
  /// `kind` at all (a Redis Cluster name whose keys would span hash slots), so that the lock
  /// object is refused when it is made rather than at every acquire. The default accepts
  /// every name core accepted.
  virtual void check_name(resource_kind kind, std::string_view name) const;

  /// Why this backend, as configured, cannot keep a lock's minimum hold
  /// (acquire_request::min_hold), in a few words for std::invalid_argument; empty when it can.
  /// The default: it cannot.
  virtual std::string min_hold_refusal() const;

  /// The semaphore's current count: max_count minus the slots held, never negative (what
  /// distributed_semaphore::current_count() returns). std::nullopt when this backend cannot
  /// tell (the default). Throws what an acquire of `request` would (connection_error,
  /// std::invalid_argument).
  virtual std::optional<std::uint32_t> current_count(const acquire_request& request);

  /// Whether the grant with `fencing_token` holds `request.name` now, as the server sees it:
  /// the holder of a lock (request.kind lock) or the writer of a reader-writer lock (mode
  /// exclusive). What distributed_lock::is_current() returns. The default asks inspect() for
  /// a holder of that kind with that token; a backend whose configuration stores no token
  /// with its grants overrides it to throw std::invalid_argument naming the option. Throws
  /// connection_error when the server cannot be asked (never "false").
  virtual bool is_current(const acquire_request& request, std::uint64_t fencing_token);

  /// The loss check of held locks that a caller can take over from the backend's thread, or
  /// nullptr when the backend's loss detection needs a thread of its own (the default; every
  /// networked backend): held_check.hpp.
  virtual caller_loss_check* as_caller_loss_check() noexcept { return nullptr; }

  /// What provider::health() reports (the default: healthy, for backends that keep nothing
  /// that can break, like file and memory). Thread-safe; cheap (no round trip): it reports
  /// what the backend's monitors last found.
  virtual provider_health health() const { return {}; }

  /// The board of this backend's leader elections (backend/election.hpp), or nullptr (the
  /// default) when the backend has none: provider::create_election then throws. A backend
  /// with a board must also keep resource_kind::election locks apart from its other names.
  virtual std::shared_ptr<election_board> elections() { return nullptr; }

  /// What the server shows of `name` now, across its primitives (the lock and reader-writer
  /// lock of that name, its semaphore): holders and, where visible, waiters. A name nobody
  /// holds or waits for gives an inspection with neither. The default throws
  /// unsupported_operation; each backend documents what it can see. Throws connection_error
  /// when the server cannot be asked.
  virtual lock_inspection inspect(const std::string& name);

  /// inspect() of every name beginning with `prefix` that is held or waited for now, in no
  /// particular order. The default throws unsupported_operation (a backend that cannot list
  /// its names).
  virtual std::vector<lock_inspection> list_locks(const std::string& prefix);

  /// An administrator's break: frees every grant of `name` (lock, reader-writer lock,
  /// semaphore slots, upgrade gate) so that waiters go on, and fences the holders out: their
  /// next grant's token is higher, and their handles are marked lost where the backend can
  /// tell them. The default throws unsupported_operation. Throws connection_error when the
  /// server cannot be told.
  virtual void break_lock(const std::string& name);

  /// Called once by core when it takes the backend over, before start().
  void attach_events(std::shared_ptr<backend_events> events) noexcept;

  /// Where the backend (and its operations and leases) report waits, extension failures and
  /// background errors: the provider's, or a sink that only prints errors until core attaches
  /// it.
  backend_events& events() const noexcept;

  /// "dlock: <scheme> <endpoint>: <what>": how every message of this backend begins.
  std::string message(std::string_view what) const;
  /// message(what) followed by " for lock '<name>'" (quoted for messages).
  std::string message(std::string_view what, std::string_view name) const;
  /// The error of a semaphore used here with request.max_count while its holders use
  /// `recorded`; `where` (optional) names where the backend found that count.
  std::invalid_argument max_count_mismatch(const acquire_request& request,
                                           std::uint64_t recorded,
                                           std::string_view where = {}) const;
  /// The error of is_current() where this backend's configuration keeps no token with its
  /// grants: `option` names what keeps them from it ("owners_table is empty").
  std::invalid_argument no_token_records(std::string_view option, std::string_view name) const;
  /// Throws std::invalid_argument when `request` is a semaphore of more than `most` slots
  /// (for a backend whose statements name every slot).
  void check_slot_count(const acquire_request& request, std::uint32_t most) const;

 protected:
  backend() = default;
  /// Runs `start` on the io thread: at once when called there (core calls start_acquire from
  /// it), else posted. `start` must not complete an operation inside the call.
  void start_on_io_thread(dlock::detail::unique_function<void()> start);
  /// The thread of executor(), owned by the backend base so that it is destroyed last.
  io_thread& io() noexcept { return io_; }

 private:
  io_thread io_;
  std::shared_ptr<backend_events> events_;
};

}  // namespace dlock
