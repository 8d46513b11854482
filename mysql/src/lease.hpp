// Private to dlock::mysql: a grant held on one connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <dlock/core/backend/lease.hpp>

#include "session.hpp"

namespace dlock::mysql::detail {

class mysql_backend;

/// A grant on one connection, given back with its RELEASE_LOCK statement. release() may run
/// on any thread; it waits up to options.release_timeout for the server, except on the io
/// thread or for a lost lease, whose release goes in the background.
class mysql_lease final : public dlock::lease {
 public:
  mysql_lease(std::shared_ptr<mysql_backend> backend, std::shared_ptr<mysql_session> session,
              std::string unlock_sql, std::uint64_t fencing_token);
  ~mysql_lease() override;

  /// Names the connection's book entry of this grant (session_pool::add_grant).
  void attach(std::uint64_t grant_id) { grant_id_ = grant_id; }

  void release() override;

 private:
  void release_in_background() noexcept;

  std::shared_ptr<mysql_backend> backend_;
  std::shared_ptr<mysql_session> session_;
  std::string unlock_sql_;
  std::uint64_t grant_id_ = 0;
  bool released_ = false;
};

}  // namespace dlock::mysql::detail
