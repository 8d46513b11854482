// Private to the SQL backends (dlock::postgres and dlock::mysql): a grant held on one pooled
// SQL session.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/blocking_call.hpp>

#include "session_lease.hpp"

namespace dlock {

/// How a pooled session gives a grant back: on the backend's thread, where the pool lives.
/// `Backend` has executor() and sessions(), whose release_grant(session, grant_id, unlock_sql,
/// done(std::string error)) forgets the grant and runs the statement there.
struct through_the_pool {
  template <typename Backend, typename Session>
  static std::string now(const std::shared_ptr<Backend>& backend,
                         const std::shared_ptr<Session>& session, std::uint64_t grant_id,
                         const std::string& unlock_sql, const std::string& name) {
    return call_and_wait<std::string>(
        backend->executor(), backend->settings().release_timeout,
        backend->message("no answer to the release within release_timeout", name),
        [backend, session, grant_id, unlock_sql](const blocking_reply<std::string>& reply) {
          backend->sessions().release_grant(
              session, grant_id, unlock_sql,
              [reply](std::string error) { reply.set_value(std::move(error)); });
        });
  }

  template <typename Backend, typename Session>
  static void later(const std::shared_ptr<Backend>& backend,
                    const std::shared_ptr<Session>& session, std::uint64_t grant_id,
                    const std::string& unlock_sql,
                    std::function<void(const std::string&)> failed) {
    boost::asio::post(backend->executor(), [backend, session, grant_id, unlock_sql, failed] {
      backend->sessions().release_grant(session, grant_id, unlock_sql,
                                        [failed](std::string error) {
                                          if (!error.empty()) failed(error);
                                        });
    });
  }
};

/// A grant on one pooled session, given back with its unlock statement on the backend's
/// thread (session_lease.hpp says when release() waits for it).
template <typename Backend, typename Session>
using pooled_lease = session_lease<Backend, Session, through_the_pool>;

}  // namespace dlock
