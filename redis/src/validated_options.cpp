#include "validated_options.hpp"

#include <algorithm>
#include <stdexcept>

namespace dlock::redis::detail {

namespace {

std::chrono::nanoseconds positive_or(std::chrono::nanoseconds value,
                                     std::chrono::nanoseconds fallback) {
  return value > std::chrono::nanoseconds::zero() ? value : fallback;
}

void validate_tls(const tls_options& tls) {
  const bool any_file = !tls.ca_file.empty() || !tls.ca_dir.empty() || !tls.cert_file.empty() ||
                        !tls.key_file.empty() || !tls.server_name.empty();
  if (!tls.enabled && (any_file || tls.verify != tls_verify::full)) {
    throw std::invalid_argument(
        "dlock: redis options: tls settings (tls_ca, tls_cert, ...) are given but tls.enabled is "
        "false (use rediss://)");
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    // Named as in options::tls and in the URL.
    throw std::invalid_argument(
        std::string("dlock: redis options: ") +
        (tls.cert_file.empty() ? "tls.key_file (tls_key) needs tls.cert_file (tls_cert)"
                               : "tls.cert_file (tls_cert) needs tls.key_file (tls_key)"));
  }
  if (tls.server_name.find_first_of(" \t\r\n/") != std::string::npos) {
    throw std::invalid_argument("dlock: redis options: tls.server_name (tls_server_name) '" +
                                tls.server_name + "' is not a host name");
  }
}

// Sentinel's options; the master it names stands in for `servers`, as their one node.
void validate_sentinel(options& opts) {
  const sentinel_options& s = opts.sentinel;
  if (s.master_name.empty()) {
    if (!s.sentinels.empty() || s.wait_replicas != 0 || s.password) {
      throw std::invalid_argument(
          "dlock: redis options: sentinel settings are given but sentinel.master_name is empty");
    }
    return;
  }
  if (!opts.servers.empty()) {
    throw std::invalid_argument(
        "dlock: redis options: servers and sentinel exclude each other (the sentinels name the "
        "master)");
  }
  if (s.master_name.find_first_of(" \t\r\n") != std::string::npos) {
    throw std::invalid_argument("dlock: redis options: sentinel.master_name '" + s.master_name +
                                "' has white space");
  }
  if (s.sentinels.empty()) {
    throw std::invalid_argument("dlock: redis options: sentinel.sentinels must name a sentinel");
  }
  for (const auto& sentinel : s.sentinels) {
    if (sentinel.host.empty() || !sentinel.unix_socket.empty() || sentinel.port == 0) {
      throw std::invalid_argument(
          "dlock: redis options: every sentinel needs a host and a port (no Unix sockets)");
    }
  }
  if (s.wait_replicas < 0 || s.wait_timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        "dlock: redis options: sentinel.wait_replicas and wait_timeout must not be negative");
  }
  opts.servers = {server{.host = s.master_name}};
}

// A cluster serves database 0 only, announces its nodes by address, and routes by hash tag,
// which plain keys (another client's key names) do not have.
void validate_cluster(const options& opts) {
  if (!opts.cluster) return;
  if (!opts.sentinel.master_name.empty()) {
    throw std::invalid_argument(
        "dlock: redis options: cluster and sentinel exclude each other (a cluster fails over by "
        "itself)");
  }
  for (const auto& s : opts.servers) {
    if (!s.unix_socket.empty()) {
      throw std::invalid_argument("dlock: redis options: cluster seed '" + s.unix_socket +
                                  "' is a Unix socket; a cluster's nodes are reached over TCP");
    }
  }
  if (opts.database != 0) {
    throw std::invalid_argument(
        "dlock: redis options: a cluster has only database 0, not database " +
        std::to_string(opts.database));
  }
  if (opts.plain_keys) {
    throw std::invalid_argument(
        "dlock: redis options: plain_keys is not supported with a cluster (a plain key and its "
        "fencing counter would not share a hash slot)");
  }
}

}  // namespace

options validated(options opts) {
  validate_sentinel(opts);
  if (opts.servers.empty()) {
    throw std::invalid_argument("dlock: redis options: servers must name at least one server");
  }
  for (const auto& s : opts.servers) {
    if (!s.unix_socket.empty()) {
      if (!s.host.empty()) {
        throw std::invalid_argument("dlock: redis options: server '" + s.host +
                                    "' has both a host and a unix_socket");
      }
      if (opts.tls.enabled) {
        throw std::invalid_argument(
            "dlock: redis options: tls over the Unix socket '" + s.unix_socket +
            "' is not supported (a local socket needs no encryption)");
      }
      continue;
    }
    if (s.host.empty()) throw std::invalid_argument("dlock: redis options: a server has no host");
    if (s.port == 0) {
      throw std::invalid_argument("dlock: redis options: server '" + s.host + "' has port 0");
    }
  }
  validate_tls(opts.tls);
  validate_cluster(opts);
  if (opts.layout == key_layout::dotnet && opts.plain_keys) {
    throw std::invalid_argument(
        "dlock: redis options: layout=dotnet cannot be combined with plain_keys (the dotnet "
        "layout's locks are plain keys already)");
  }
  if (opts.expiry < std::chrono::milliseconds(10)) {
    throw std::invalid_argument("dlock: redis options: expiry must be at least 10ms");
  }
  if (opts.extend_every < std::chrono::nanoseconds::zero() || opts.extend_every >= opts.expiry) {
    throw std::invalid_argument(
        "dlock: redis options: extend_every must be positive and below the expiry");
  }
  if (opts.command_timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: redis options: command_timeout must not be negative");
  }
  if (opts.release_timeout <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: redis options: release_timeout must be positive");
  }
  if (opts.client_name.empty() ||
      opts.client_name.find_first_of(" \t\r\n") != std::string::npos) {
    throw std::invalid_argument(
        "dlock: redis options: client_name must be a non-empty word without spaces");
  }
  if (opts.database < 0) {
    throw std::invalid_argument("dlock: redis options: database must not be negative");
  }
  opts.extend_every = positive_or(opts.extend_every, opts.expiry / 3);
  opts.command_timeout =
      positive_or(opts.command_timeout, std::min<std::chrono::nanoseconds>(opts.expiry / 3,
                                                                            std::chrono::seconds(5)));
  opts.sentinel.wait_timeout = positive_or(opts.sentinel.wait_timeout, opts.command_timeout / 2);
  if (opts.sentinel.wait_timeout >= opts.command_timeout) {
    throw std::invalid_argument(
        "dlock: redis options: sentinel.wait_timeout (wait_timeout) must be below "
        "command_timeout (the WAIT holds the command connection)");
  }
  return opts;
}

}  // namespace dlock::redis::detail
