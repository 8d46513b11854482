// Private to dlock::postgres: a grant taken on a caller-driven session (caller_sessions.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <dlock/core/backend/lease.hpp>

#include "caller_sessions.hpp"

namespace dlock::postgres::detail {

class postgres_backend;

/// A grant on one caller-driven session, given back with its unlock statement on the
/// releasing caller's thread (waiting at most release_timeout), or from the io thread in the
/// background when released there, lost or destroyed unreleased.
class caller_lease final : public lease {
 public:
  caller_lease(std::shared_ptr<postgres_backend> backend,
               std::shared_ptr<caller_session> session, std::string unlock_sql,
               std::uint64_t fencing_token);
  ~caller_lease() override;

  /// Names the session's book entry of this grant.
  void attach(std::uint64_t grant_id) noexcept { grant_id_ = grant_id; }

  void release() override;

  /// The server process of the grant's session (pg_locks.pid).
  int backend_pid() const noexcept { return session_->pid; }

 private:
  void release_in_background() noexcept;

  std::shared_ptr<postgres_backend> backend_;
  std::shared_ptr<caller_session> session_;
  std::string unlock_sql_;
  std::uint64_t grant_id_ = 0;
  bool released_ = false;
};

}  // namespace dlock::postgres::detail
