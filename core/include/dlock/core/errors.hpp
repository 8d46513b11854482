// dlock/core/errors.hpp: the exceptions every dlock operation throws.
//
// One channel per outcome (docs/errors.md):
//   timeout_error     acquire() did not obtain the lock within its timeout
//   cancelled_error   acquire() was ended by a stop request
//   connection_error  the backend could not be reached, or dropped us
//   lock_lost_error   an operation needed the lock, but it was lost
//   deadlock_error    the backend broke a deadlock by failing this acquire
//   unsupported_operation  this backend, as configured, cannot do what was asked
//   std::invalid_argument  a bad name, URL, option or timeout (not a dlock::error)
// try_acquire() reports "not obtained" as an empty optional, never as an exception.
#pragma once

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

namespace dlock {

/// Receives errors that have no caller to be thrown to: a release that failed in a handle's
/// destructor, a monitor that could not reach its backend. The default (an empty function)
/// prints one line to stderr. It may run on any thread and must not throw.
using error_handler = std::function<void(std::exception_ptr)>;

/// Base of every exception dlock throws for a backend outcome. Messages read
/// `dlock: <backend> <endpoint>: <what failed> for lock '<name>'`.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// acquire() gave up because its timeout passed before the lock was granted.
class timeout_error : public error {
 public:
  using error::error;
};

/// acquire() gave up because its std::stop_token was triggered.
class cancelled_error : public error {
 public:
  using error::error;
};

/// The backend could not be reached, refused us, or dropped the connection.
/// The message names the endpoint (never a password).
class connection_error : public error {
 public:
  using error::error;
};

/// An operation needed the lock, but exclusivity can no longer be guaranteed.
class lock_lost_error : public error {
 public:
  using error::error;
};

/// The backend found that this acquire would close a cycle of waiters (PostgreSQL's deadlock
/// detector, SQLSTATE 40P01) and failed it to break the cycle. Not a timeout: waiting longer
/// cannot help. Release what the caller holds and retry, or take locks in one fixed order
/// (dlock::acquire_all does).
class deadlock_error : public error {
 public:
  using error::error;
};

/// This backend, as configured, cannot do what was asked: inspect(), list_locks() or
/// break_lock() where it cannot look, an option its deployment refuses. The message names the
/// backend, the operation, and the option that would allow it where one would. Retrying
/// cannot help.
class unsupported_operation : public error {
 public:
  using error::error;
};

}  // namespace dlock
