// Private to the SQL backends: a grant taken on a caller-driven session
// (caller_session_pool.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "session_lease.hpp"

namespace dlock {

/// How a caller-driven session gives a grant back: on the releasing caller's thread (waiting
/// at most release_timeout), or from the io thread in the background. `Backend` has callers(),
/// its caller_session_pool.
struct on_the_callers_thread {
  template <typename Backend, typename Session>
  static std::string now(const std::shared_ptr<Backend>& backend,
                         const std::shared_ptr<Session>& session, std::uint64_t grant_id,
                         const std::string& unlock_sql, const std::string& /*name*/) {
    return backend->callers().release(session, grant_id, unlock_sql,
                                      backend->settings().release_timeout);
  }

  template <typename Backend, typename Session>
  static void later(const std::shared_ptr<Backend>& backend,
                    const std::shared_ptr<Session>& session, std::uint64_t grant_id,
                    const std::string& unlock_sql,
                    std::function<void(const std::string&)> failed) {
    backend->callers().release_in_background(
        session, grant_id, unlock_sql,
        [failed = std::move(failed)](std::string error) { failed(error); });
  }
};

/// A grant on one caller-driven session, given back on the releasing thread.
template <typename Backend, typename Session>
using caller_lease = session_lease<Backend, Session, on_the_callers_thread>;

}  // namespace dlock
