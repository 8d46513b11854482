// Private to dlock::redis: how to reach and log in to one server, the same for the async
// connections and the blocking pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::redis::detail {

class tls_client;
class sentinel_master;
struct reply;

/// How to reach and log in to one server.
struct server_settings {
  std::string host;
  std::uint16_t port = 6379;
  std::string unix_socket;  ///< when set, reached over this Unix socket instead of host:port
  /// TLS over TCP when set (shared by every connection of the provider); null: plain.
  std::shared_ptr<tls_client> tls;
  std::string user;                     ///< ACL user; empty: the default user
  std::optional<std::string> password;  ///< never shown in any message
  int database = 0;
  std::chrono::nanoseconds command_timeout = std::chrono::seconds(5);
  std::string client_name = "dlock";
  /// Set for a Sentinel deployment: the host and port above are unused, and each connection
  /// asks the sentinels for the master, then checks it with ROLE (sentinel_transport.cpp).
  std::shared_ptr<sentinel_master> sentinel;
};

/// One step of logging in: the command and what its error reply means.
struct log_in_step {
  std::vector<std::string> command;
  std::string failure;  ///< e.g. "authentication failed", followed by the server's words
  /// For a step whose reply must say more than "no error": returns why `answer` is refused
  /// (appended to `failure`), or an empty string.
  std::function<std::string(const reply& answer)> check;
  /// For a step whose command depends on what opening the transport found (Sentinel's failover
  /// epoch): made once the transport is open, and sent after the other steps. Only last steps.
  std::function<std::vector<std::string>()> late_command;
};

/// AUTH (when there is a password), SELECT (a database other than 0, not for subscriptions),
/// CLIENT SETNAME and, for a master found through Sentinel, ROLE (it must be "master") and the
/// raise of its failover epoch (sentinel_master::raise_epoch_step), in that order.
std::vector<log_in_step> log_in_steps(const server_settings& settings, bool for_subscriptions);

}  // namespace dlock::redis::detail
