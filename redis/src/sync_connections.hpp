// Private to dlock::redis: a pool of blocking connections to one server, for the caller's
// thread (any thread).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "log_in.hpp"
#include "reply.hpp"

struct redisContext;

namespace dlock::redis::detail {

/// Blocking connections for the caller's thread, kept in a pool: a blocking acquire's first
/// attempt and a release on one server go there directly instead of through the network
/// thread, which saves two thread hops on the uncontended path.
class sync_connections {
 public:
  explicit sync_connections(const server_settings& settings) : settings_(settings) {}
  ~sync_connections();
  sync_connections(const sync_connections&) = delete;
  sync_connections& operator=(const sync_connections&) = delete;

  /// Sends `arguments` on an idle connection (a new one, logged in, when none is idle) and
  /// waits at most the command timeout for the reply.
  command_result command(const std::vector<std::string>& arguments);

 private:
  redisContext* connect(std::string& failure);

  const server_settings& settings_;
  std::mutex mutex_;
  std::vector<redisContext*> idle_;
};

}  // namespace dlock::redis::detail
