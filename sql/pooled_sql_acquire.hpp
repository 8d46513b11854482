// Private to the SQL backends (dlock::postgres and dlock::mysql): what an acquire on a pool of
// SQL sessions keeps whatever its server, so that MySQL's and PostgreSQL's acquires (their
// src/acquire.hpp) differ only in their statements and how they cancel them.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/lease.hpp>

#include "sql_wait_io.hpp"

namespace dlock::detail {

/// One acquire on a pooled backend: an attempt on a shared session, then maybe a wait on a
/// session reserved for it, whose statement async_sql_wait_io performs. `Derived` (the
/// backend's acquire) is made with std::make_shared and implements stop(), the withdrawal
/// cancel() posts, and the wait's actions but keep_session(). `Backend` has executor(),
/// sessions() (a session_books of `Session`) and keepalive() (its session_keepalive);
/// `Answer` is its statements' result. Runs on the backend's io thread except cancel().
template <typename Derived, typename Backend, typename Session, typename Answer>
class pooled_sql_acquire : public acquire_operation,
                           public std::enable_shared_from_this<Derived>,
                           protected async_sql_wait_io {
 public:
  void cancel() noexcept override {
    try {
      std::shared_ptr<pooled_sql_acquire> self = this->shared_from_this();
      boost::asio::post(backend_->executor(), [self = std::move(self)] { self->stop(); });
    } catch (...) {
    }
  }

 protected:
  pooled_sql_acquire(std::shared_ptr<Backend> backend, acquire_request request,
                     acquire_completion done)
      : backend_(std::move(backend)), request_(std::move(request)), done_(std::move(done)) {}

  // A wait that ended without leaving anything behind gives its session back to the pool.
  void keep_session() override { backend_->sessions().unreserve(session_); }

  /// The validity of a grant on session_ (session_keepalive::validity_of_grant): every
  /// statement of this acquire was sent after began_.
  std::shared_ptr<const grant_validity> grant_validity_now() const {
    return backend_->keepalive().validity_of_grant(session_, began_, own_session_);
  }

  std::shared_ptr<Backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  std::string resource_;  // what the session's books call the grant (Derived sets it)
  std::shared_ptr<Session> session_;
  bool own_session_ = false;  // session_ was reserved for a wait
  bool stopped_ = false;
  Answer answer_;                   // the wait's
  std::unique_ptr<lease> granted_;  // the wait's, booked until it is reported
  const std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();

 private:
  /// Withdraws the acquire, on the io thread.
  virtual void stop() = 0;
};

}  // namespace dlock::detail
