// dlock/core/backend/inline_acquirer.hpp: the optional capability of a backend that can acquire
// on the caller's thread (for backend implementers). Core's routes for it are in
// docs/architecture.md ("Routes an acquire and a release take"), with what each one buys.
#pragma once

#include <memory>
#include <stop_token>

#include <dlock/core/backend/lease.hpp>

namespace dlock {

struct acquire_request;

/// What a backend offers through backend::as_inline_acquirer(): one non-waiting attempt cheap
/// enough to make on the caller's thread (local system calls, or one network round trip on a
/// connection the caller may use directly), so that core settles an uncontended blocking
/// acquire without a thread hop; optionally the wait too. Offered by file, memory, PostgreSQL
/// and Redis on one server.
class inline_acquirer {
 public:
  virtual ~inline_acquirer() = default;

  /// Makes one non-waiting attempt on the calling thread. Returns the lease, or nullptr when
  /// the lock is taken. Throws what start_acquire's completion would fail with
  /// (connection_error, std::invalid_argument). Requires: request.wait is false.
  virtual std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) = 0;

  /// True when try_acquire_inline() never waits for a network (local system calls or memory
  /// only). Core then makes an uncontended async acquire's attempt on the initiating thread
  /// too, and posts the result to the handler, where a network round trip there would block a
  /// caller that asked not to be blocked.
  virtual bool acquires_inline_locally() const noexcept = 0;

  /// True when acquire_waiting_inline() is offered for `request`: the whole of a blocking
  /// acquire, its wait included, on the caller's thread (which waits anyway), so that neither
  /// the grant nor its release goes through the backend's thread. False by default.
  virtual bool waits_inline(const acquire_request& request) const noexcept;

  /// Attempts, then waits on the calling thread until granted or `request.deadline` (the
  /// lease, or nullptr). A stop requested through `withdraw` (from another thread: it must
  /// wake the wait) withdraws the wait as cancel() does, and returns once the server
  /// confirmed (nullptr, or the lease if the grant won the race). `give_up` is requested
  /// when core's grace after that stop has passed: return nullptr at once, and let the
  /// withdrawal settle behind (a silent server never confirms). Leaves nothing at the server.
  /// Throws what start_acquire's completion would fail with (connection_error, never a hang
  /// on a silent server). Core holds the name's local gate around the call. Requires:
  /// waits_inline(request); request.wait is true. The default throws std::logic_error.
  virtual std::unique_ptr<lease> acquire_waiting_inline(const acquire_request& request,
                                                        std::stop_token withdraw,
                                                        std::stop_token give_up);
};

}  // namespace dlock
