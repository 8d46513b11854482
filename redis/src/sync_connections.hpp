// Private to dlock::redis: a pool of connections for the caller's thread (any thread).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "log_in.hpp"
#include "reply.hpp"

namespace dlock::redis::detail {

/// Connections for the caller's thread, kept in a pool: a blocking acquire's first attempt and
/// a release on one server go there directly instead of through the network thread, which
/// saves two thread hops on the uncontended path.
///
/// Each is the backend's ordinary connection (the same transports, log-in and timeouts) on an
/// io_context of its own, which the calling thread runs until its reply came.
class sync_connections {
 public:
  explicit sync_connections(const server_settings& settings);
  ~sync_connections();
  sync_connections(const sync_connections&) = delete;
  sync_connections& operator=(const sync_connections&) = delete;

  /// Sends `arguments` on an idle connection (a new one, logged in, when none is idle) and
  /// waits at most the command timeout for the reply.
  command_result command(const std::vector<std::string>& arguments);

 private:
  struct pooled;

  const server_settings& settings_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<pooled>> idle_;
};

}  // namespace dlock::redis::detail
