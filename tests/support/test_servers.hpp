// The real servers the networked backends are tested against: their endpoints and the fault
// helpers of scripts/test-servers.sh (start here: test_server_endpoint, test_servers).
//
// CTest fixtures start the servers (cmake/dlock_test_servers.cmake); a test reads where they
// listen and may pause, resume, restart or kill one, or end its clients' connections. Servers a
// developer keeps up by hand are found the same way (docs/testing.md).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace support {

/// Returns the endpoint URL in `variable` (e.g. "DLOCK_TEST_REDIS"): from the environment when
/// set there, else from the endpoints file (DLOCK_TEST_SERVERS_ENV, else
/// test_servers_state_dir()/endpoints.env); nullopt when neither has it.
std::optional<std::string> test_server_endpoint(std::string_view variable);

/// Returns test_server_endpoint(variable), or throws std::runtime_error naming the variable and
/// the file looked at, with the command that starts the servers.
std::string require_test_server_endpoint(std::string_view variable);

/// The servers' state directory: $DLOCK_TEST_STATE_DIR, else the one CMake configured.
std::filesystem::path test_servers_state_dir();

struct host_port {
  std::string host;
  int port = 0;
};

/// Splits an endpoint URL such as "redis://127.0.0.1:7001,127.0.0.1:7002/x" into its hosts.
/// Throws std::invalid_argument when a host has no port.
std::vector<host_port> endpoint_hosts(std::string_view url);

struct script_result {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

/// Runs scripts/test-servers.sh --state-dir <test_servers_state_dir()> `arguments`; blocks until
/// it exits or `timeout` passes (then exit_code is -1).
script_result run_test_servers_script(const std::vector<std::string>& arguments,
                                      std::chrono::seconds timeout = std::chrono::seconds(120));

/// Runs the script like run_test_servers_script, e.g. test_servers({"pause", "redis"}).
/// Throws std::runtime_error with the script's output unless it exits with 0.
void test_servers(const std::vector<std::string>& arguments);

/// Runs a test-servers.sh command when destroyed, e.g. {"resume", "redis"} after a pause, so that
/// a failing fault test leaves the servers usable for the tests after it. Errors are printed to
/// stderr, never thrown.
class undo_test_servers_fault {
 public:
  explicit undo_test_servers_fault(std::vector<std::string> arguments);
  ~undo_test_servers_fault();
  /// Undoes the fault now instead of on destruction; throws like test_servers().
  void now();
  undo_test_servers_fault(const undo_test_servers_fault&) = delete;
  undo_test_servers_fault& operator=(const undo_test_servers_fault&) = delete;

 private:
  std::vector<std::string> arguments_;
  bool done_ = false;
};

}  // namespace support
