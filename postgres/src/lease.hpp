// Private to dlock::postgres: a grant held on one session.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <dlock/core/backend/lease.hpp>

#include "session.hpp"

namespace dlock::postgres::detail {

class postgres_backend;

/// A grant on one session, given back with its unlock statement. release() may run on any
/// thread; it waits up to options.release_timeout for the server, except on the io thread or
/// for a lost lease, whose release goes in the background.
class pg_lease final : public dlock::lease {
 public:
  pg_lease(std::shared_ptr<postgres_backend> backend, std::shared_ptr<pg_session> session,
           std::string unlock_sql, std::uint64_t fencing_token);
  ~pg_lease() override;

  /// Names the session's book entry of this grant (session_pool::add_grant).
  void attach(std::uint64_t grant_id) { grant_id_ = grant_id; }

  void release() override;

 private:
  void release_in_background() noexcept;

  std::shared_ptr<postgres_backend> backend_;
  std::shared_ptr<pg_session> session_;
  std::string unlock_sql_;
  std::uint64_t grant_id_ = 0;
  bool released_ = false;
};

}  // namespace dlock::postgres::detail
