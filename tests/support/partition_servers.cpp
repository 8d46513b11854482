#include "partition_servers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace support {

namespace {

std::filesystem::path endpoints_file() { return partition_servers::state_dir() / "endpoints.env"; }

// The value of `variable` in an endpoints file ("export NAME=value" lines, never quoted).
std::optional<std::string> value_in(const std::filesystem::path& file, std::string_view variable) {
  std::ifstream in(file);
  const std::string prefix = "export " + std::string(variable) + "=";
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(prefix)) return line.substr(prefix.size());
  }
  return std::nullopt;
}

void run_partition_command(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "--partition-set");
  test_servers(arguments);
}

}  // namespace

std::string_view path_letter(net_path path) { return path == net_path::a ? "A" : "B"; }

std::filesystem::path partition_servers::state_dir() {
  return test_servers_state_dir() / "partition";
}

std::optional<std::string> partition_servers::unavailable_reason() {
  if (!std::filesystem::exists(endpoints_file())) {
    return "the partition set is not up (no " + endpoints_file().string() +
           "): it needs root and iproute2; its fixture's output (servers/start-partition) says "
           "why it did not start";
  }
  return std::nullopt;
}

partition_servers::partition_servers() : endpoints_(endpoints_file()) {
  if (auto reason = unavailable_reason()) {
    throw std::runtime_error(*reason + "; start it with: " DLOCK_TEST_SERVERS_SCRIPT
                             " --state-dir " + test_servers_state_dir().string() +
                             " --partition-set start");
  }
}

std::string partition_servers::url(std::string_view backend, net_path path) const {
  const std::string variable =
      "DLOCK_PARTITION_" + std::string(backend) + "_" + std::string(path_letter(path));
  if (auto value = value_in(endpoints_, variable)) return *value;
  throw std::runtime_error(variable + " is not in " + endpoints_.string() +
                           " (is that server group part of the partition set?)");
}

namespace {

void run_path_command(const char* command, const std::vector<std::string>& servers,
                      net_path path) {
  std::vector<std::string> arguments{command};
  arguments.insert(arguments.end(), servers.begin(), servers.end());
  arguments.emplace_back(path_letter(path));
  run_partition_command(std::move(arguments));
}

}  // namespace

void partition_servers::cut(std::string_view server, net_path path) {
  cut(std::vector<std::string>{std::string(server)}, path);
}

void partition_servers::heal(std::string_view server, net_path path) {
  heal(std::vector<std::string>{std::string(server)}, path);
}

void partition_servers::cut(const std::vector<std::string>& servers, net_path path) {
  run_path_command("partition", servers, path);
}

void partition_servers::heal(const std::vector<std::string>& servers, net_path path) {
  run_path_command("heal", servers, path);
}

void partition_servers::heal_all() { run_partition_command({"heal-all"}); }

void partition_servers::restart(std::string_view server) {
  run_partition_command({"restart", std::string(server)});
}

// One command for all the servers: one server after another, each its own run of the script,
// took seconds on a loaded CI machine, and a quorum backend's waiters then failed (their bound
// counted from the second cut) before the last cut was even made.
partition_cut::partition_cut(partition_servers& servers, std::vector<std::string> servers_to_cut,
                             net_path path)
    : servers_(servers), path_(path) {
  if (servers_to_cut.empty()) return;
  servers_.cut(servers_to_cut, path_);
  cut_ = std::move(servers_to_cut);
}

void partition_cut::heal() {
  auto cut = std::move(cut_);
  cut_.clear();
  if (!cut.empty()) servers_.heal(cut, path_);
}

partition_cut::~partition_cut() {
  try {
    heal();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "healing a partition failed: %s\n", e.what());
  }
}

connect_outcome try_tcp_connect(const host_port& at, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  connect_outcome outcome;
  const auto finish = [&](int error) {
    outcome.connected = error == 0;
    outcome.error = error;
    outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    return outcome;
  };
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(at.port));
  if (::inet_pton(AF_INET, at.host.c_str(), &address.sin_addr) != 1) {
    throw std::invalid_argument("try_tcp_connect: '" + at.host + "' is not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  int error = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1) {
        socklen_t size = sizeof error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      } else {
        error = ETIMEDOUT;
      }
    }
  }
  ::close(fd);
  return finish(error);
}

}  // namespace support
