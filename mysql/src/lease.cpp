#include "lease.hpp"

#include <boost/asio/post.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::mysql::detail {

mysql_lease::mysql_lease(std::shared_ptr<mysql_backend> backend,
                         std::shared_ptr<mysql_session> session, std::string unlock_sql,
                         std::uint64_t fencing_token)
    : lease(fencing_token), backend_(std::move(backend)), session_(std::move(session)),
      unlock_sql_(std::move(unlock_sql)) {}

mysql_lease::~mysql_lease() {
  if (!released_) release_in_background();
}

void mysql_lease::release() {
  released_ = true;
  // A lost lease's connection is gone (the server freed the lock) or a hold limit releases
  // it: nothing to wait for, and the provider's thread may be busy.
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

// From the io thread (a hold limit, a handler) or a destructor: nobody can wait for it.
void mysql_lease::release_in_background() noexcept {
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

}  // namespace dlock::mysql::detail
