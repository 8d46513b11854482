#include "caller_lease.hpp"

#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::postgres::detail {

caller_lease::caller_lease(std::shared_ptr<postgres_backend> backend,
                           std::shared_ptr<caller_session> session, std::string unlock_sql,
                           std::uint64_t fencing_token)
    : lease(fencing_token), backend_(std::move(backend)), session_(std::move(session)),
      unlock_sql_(std::move(unlock_sql)) {}

caller_lease::~caller_lease() {
  if (!released_) release_in_background();
}

void caller_lease::release() {
  released_ = true;
  // A lost lease's session is gone (the server freed the lock); the io thread must not block.
  if (backend_->running_in_this_thread() || lost()) {
    release_in_background();
    return;
  }
  const std::string error = backend_->callers().release(session_, grant_id_, unlock_sql_,
                                                        backend_->settings().release_timeout);
  if (!error.empty()) throw connection_error(backend_->message("release failed: " + error));
}

void caller_lease::release_in_background() noexcept {
  released_ = true;
  try {
    backend_->callers().release_in_background(
        session_, grant_id_, unlock_sql_, [backend = backend_](std::string error) {
          backend->events().background_error(std::make_exception_ptr(
              connection_error(backend->message("release failed: " + error))));
        });
  } catch (...) {
    backend_->events().background_error(std::current_exception());
  }
}

}  // namespace dlock::postgres::detail
