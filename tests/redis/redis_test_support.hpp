// What the Redis backend's own tests share: the test server's endpoint and the real redis-cli
// to look at (and change) the server's state behind dlock's back.
#pragma once

#include <string>
#include <vector>

#include "support.hpp"
#include "test_servers.hpp"

namespace redis_test {

/// The key prefix of this test process, so that its keys never meet another's.
inline const std::string& prefix() {
  static const std::string value = support::unique_name("redis-test") + ":";
  return value;
}

/// The key of the lock `name` under prefix().
inline std::string key_of(const std::string& name) { return prefix() + "{" + name + "}"; }

/// A file of the test CA's directory (ca.crt, other-ca.crt, client.key, ...).
inline std::string tls_file(const std::string& name) {
  return support::require_test_server_endpoint("DLOCK_TEST_TLS_DIR") + "/" + name;
}

/// The single test server's URL, "redis://127.0.0.1:<port>".
inline std::string endpoint() { return support::require_test_server_endpoint("DLOCK_TEST_REDIS"); }

/// The three RedLock servers' URL, "redis://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>".
inline std::string redlock_endpoint() {
  return support::require_test_server_endpoint("DLOCK_TEST_REDLOCK");
}

inline int port_of(const std::string& url, std::size_t i = 0) {
  return support::endpoint_hosts(url).at(i).port;
}

/// "127.0.0.1:port" of server `i` of `url`, as dlock's messages name it.
inline std::string endpoint_of(const std::string& url, std::size_t i) {
  return "127.0.0.1:" + std::to_string(port_of(url, i));
}

/// Runs `redis-cli -p <port> <arguments>` and returns its output, each reply on its own line,
/// without the last newline. Throws when redis-cli fails or hangs.
inline std::string redis_cli(int port, std::vector<std::string> arguments) {
  std::vector<std::string> argv{"/usr/bin/redis-cli", "-h", "127.0.0.1", "-p", std::to_string(port)};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  support::child_process cli(argv);
  cli.close_stdin();
  std::string output = cli.read_all();
  auto status = cli.wait();
  if (!status || support::exit_code(*status) != 0) {
    throw std::runtime_error("redis-cli " + arguments.at(0) + " failed: " + output);
  }
  if (!output.empty() && output.back() == '\n') output.pop_back();
  return output;
}

/// redis-cli against the single test server.
inline std::string redis_cli(std::vector<std::string> arguments) {
  return redis_cli(port_of(endpoint()), std::move(arguments));
}

}  // namespace redis_test
