// Private to the SQL backends (dlock::postgres and dlock::mysql): a grant held on one pooled
// SQL session.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/lease.hpp>
#include <dlock/core/errors.hpp>

namespace dlock {

/// A grant on one session, given back with its unlock statement. release() may run on any
/// thread; it waits up to the backend's settings().release_timeout for the server, except on
/// the backend's thread or for a lost lease, whose release goes in the background.
///
/// `Backend` is a dlock::backend with settings().release_timeout and sessions(), whose
/// release_grant(session, grant_id, unlock_sql, done(std::string error)) forgets the grant and
/// runs the statement on the backend's thread.
template <typename Backend, typename Session>
class pooled_lease final : public lease {
 public:
  pooled_lease(std::shared_ptr<Backend> backend, std::shared_ptr<Session> session,
               std::string unlock_sql, std::uint64_t fencing_token)
      : lease(fencing_token), backend_(std::move(backend)), session_(std::move(session)),
        unlock_sql_(std::move(unlock_sql)) {}
  ~pooled_lease() override {
    if (!released_) release_in_background();
  }

  /// The session the grant is held on (its connection is fixed for the session's life).
  const std::shared_ptr<Session>& session() const noexcept { return session_; }

  /// Names the session's book entry of this grant.
  void attach(std::uint64_t grant_id) { grant_id_ = grant_id; }

  void release() override {
    released_ = true;
    // A lost lease's session is gone (the server freed the lock) or a hold limit releases
    // it: nothing to wait for, and the backend's thread may be busy.
    if (backend_->running_in_this_thread() || lost()) {
      release_in_background();
      return;
    }
    const std::string error = call_and_wait<std::string>(
        backend_->executor(), backend_->settings().release_timeout,
        backend_->message("no answer to the release in time"),
        [backend = backend_, session = session_, id = grant_id_,
         sql = unlock_sql_](const blocking_reply<std::string>& reply) {
          backend->sessions().release_grant(
              session, id, sql, [reply](std::string error) { reply.set_value(std::move(error)); });
        });
    if (!error.empty()) throw connection_error(backend_->message("release failed: " + error));
  }

 private:
  // From the backend's thread (a hold limit, a handler) or a destructor: nobody can wait.
  void release_in_background() noexcept {
    released_ = true;
    try {
      boost::asio::post(backend_->executor(), [backend = backend_, session = session_,
                                               id = grant_id_, sql = unlock_sql_] {
        backend->sessions().release_grant(session, id, sql, [backend](std::string error) {
          if (!error.empty()) {
            backend->events().background_error(std::make_exception_ptr(
                connection_error(backend->message("release failed: " + error))));
          }
        });
      });
    } catch (...) {
      backend_->events().background_error(std::current_exception());
    }
  }

  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Session> session_;
  std::string unlock_sql_;
  std::uint64_t grant_id_ = 0;
  bool released_ = false;
};

}  // namespace dlock
