// The partition set of the test servers: servers inside a network namespace, each reachable
// over two paths, A and B, that a test cuts and heals one at a time (start here:
// partition_servers, partition_cut).
//
// The fixture `partition_servers` (cmake/dlock_test_servers.cmake) starts the set with
// `scripts/test-servers.sh --partition-set start`; its endpoints are in
// <state dir>/partition/endpoints.env (docs/testing.md, "Partitions"). A cut path is silent both
// ways, as a real partition is: writes succeed, nothing arrives, a new connect fails after about
// a second (EHOSTUNREACH). The other path of the same server stays up, so one test process can
// hold a partitioned client (URLs over path A) and a healthy contender (path B) at once.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "test_servers.hpp"

namespace support {

/// One of the two paths to every server of the partition set.
enum class net_path { a, b };

/// "A" or "B".
std::string_view path_letter(net_path path);

/// The partition set's endpoints and its fault commands. Thread safety: distinct objects are
/// safe; a shared one only for url().
class partition_servers {
 public:
  /// Reads the set's endpoints file. Throws std::runtime_error naming the file and the command
  /// that starts the set when it is missing.
  partition_servers();

  /// Why the partition tests cannot run in this environment (the set is not up, no endpoints
  /// file), or nullopt when they can.
  static std::optional<std::string> unavailable_reason();

  /// The set's state directory: test_servers_state_dir()/partition.
  static std::filesystem::path state_dir();

  /// The URL of `backend` ("REDIS", "REDLOCK", "POSTGRES", "ZOOKEEPER", "ZOOKEEPER_ENSEMBLE",
  /// "REDIS_SENTINEL", "REDIS_SENTINEL_NODES", ...: docs/testing.md, "Partitions")
  /// over `path`: DLOCK_PARTITION_<backend>_<A|B>. Throws std::runtime_error when the set has
  /// no such server group.
  std::string url(std::string_view backend, net_path path) const;

  /// Cuts `path` to `server` ("redis", "redlock2", "zk1", ...): from now on nothing crosses it,
  /// in either direction. Blocks for the script's run (about 0.1 s). Throws std::runtime_error
  /// with the script's output when it fails.
  void cut(std::string_view server, net_path path);

  /// Restores a cut path and returns once it carries packets again.
  void heal(std::string_view server, net_path path);

  /// Cuts `path` to each of `servers` in one run of the script, all at one moment.
  void cut(const std::vector<std::string>& servers, net_path path);

  /// Restores `path` to each of `servers` in one run of the script.
  void heal(const std::vector<std::string>& servers, net_path path);

  /// Restores every cut path of the set.
  void heal_all();

  /// Stops `server` and starts it again on its port and data, returning once it answers.
  /// Throws std::runtime_error with the script's output when it does not come back.
  void restart(std::string_view server);

 private:
  std::filesystem::path endpoints_;
};

/// Cuts paths on construction and heals them when destroyed, so that a failing test never
/// leaves a partition behind for the next one. Errors on destruction go to stderr.
class partition_cut {
 public:
  /// Cuts `path` to each of `servers_to_cut`, all at once (one run of the script).
  partition_cut(partition_servers& servers, std::vector<std::string> servers_to_cut,
                net_path path = net_path::a);
  ~partition_cut();
  partition_cut(const partition_cut&) = delete;
  partition_cut& operator=(const partition_cut&) = delete;

  /// Heals now (once); throws like partition_servers::heal.
  void heal();

 private:
  partition_servers& servers_;
  std::vector<std::string> cut_;
  net_path path_;
};

/// What a TCP connect attempt came to.
struct connect_outcome {
  bool connected = false;
  int error = 0;  ///< errno of a failed connect, ETIMEDOUT when `timeout` passed
  std::chrono::milliseconds took{};
};

/// Connects to `at` once, giving up after `timeout`, and closes the connection.
connect_outcome try_tcp_connect(const host_port& at, std::chrono::milliseconds timeout);

}  // namespace support
