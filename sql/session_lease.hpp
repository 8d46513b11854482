// Private to the SQL backends (dlock::postgres and dlock::mysql): a grant held on one SQL
// session, whichever way the session gives it back.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/errors.hpp>

namespace dlock {

/// A grant on one session, given back with its unlock statement, known valid by the clock
/// while its session's keepalive hears the server (session_keepalive.hpp). release() may run
/// on any thread; it waits up to the backend's settings().release_timeout for the server,
/// except on the backend's thread or for a lost lease, whose release goes in the background
/// (as a destructor's does).
///
/// `Backend` is a dlock::backend with settings().release_timeout. `Return` says how the
/// session gives a grant back: Return::now(backend, session, grant_id, unlock_sql, name) waits
/// and returns the error (empty on success), or throws connection_error naming the lock;
/// Return::later(backend, session, grant_id, unlock_sql, failed) does not wait and reports an
/// error to `failed`.
template <typename Backend, typename Session, typename Return>
class session_lease final : public lease {
 public:
  /// `validity` is the session's: until when its server is known to keep the grant.
  /// `name` is the lock's, for the errors of its release.
  session_lease(std::shared_ptr<Backend> backend, std::shared_ptr<Session> session,
                std::string name, std::string unlock_sql, std::uint64_t fencing_token,
                std::shared_ptr<const grant_validity> validity)
      : lease(fencing_token, std::move(validity)), backend_(std::move(backend)),
        session_(std::move(session)), name_(std::move(name)),
        unlock_sql_(std::move(unlock_sql)) {}
  ~session_lease() override {
    if (!released_) release_in_background();
  }

  /// The session the grant is held on.
  const std::shared_ptr<Session>& session() const noexcept { return session_; }

  /// Names the session's book entry of this grant.
  void attach(std::uint64_t grant_id) noexcept { grant_id_ = grant_id; }

  void release() override {
    released_ = true;
    // A lost lease's session is gone (the server freed the lock) or a hold limit releases
    // it: nothing to wait for, and the backend's thread may be busy.
    if (backend_->running_in_this_thread() || lost()) {
      release_in_background();
      return;
    }
    const std::string error = Return::now(backend_, session_, grant_id_, unlock_sql_, name_);
    if (!error.empty()) {
      throw connection_error(backend_->message("release failed: " + error, name_));
    }
  }

 private:
  // From the backend's thread (a hold limit, a handler) or a destructor: nobody can wait.
  void release_in_background() noexcept {
    released_ = true;
    try {
      Return::later(backend_, session_, grant_id_, unlock_sql_,
                    [backend = backend_, name = name_](const std::string& error) {
                      backend->events().background_error(std::make_exception_ptr(
                          connection_error(backend->message("release failed: " + error, name))));
                    });
    } catch (...) {
      backend_->events().background_error(std::current_exception());
    }
  }

  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Session> session_;
  std::string name_;
  std::string unlock_sql_;
  std::uint64_t grant_id_ = 0;
  bool released_ = false;
};

}  // namespace dlock
