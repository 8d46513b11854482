#include "test_servers.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "support.hpp"

namespace support {

namespace {

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::filesystem::path endpoints_file() {
  if (auto file = environment("DLOCK_TEST_SERVERS_ENV")) return *file;
  return test_servers_state_dir() / "endpoints.env";
}

// Lines are "export NAME=value" or "NAME=value"; values are never quoted.
std::optional<std::string> value_in_file(const std::filesystem::path& file,
                                         std::string_view variable) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::string_view rest = line;
    if (rest.starts_with("export ")) rest.remove_prefix(7);
    if (rest.starts_with(variable) && rest.substr(variable.size()).starts_with('=')) {
      return std::string(rest.substr(variable.size() + 1));
    }
  }
  return std::nullopt;
}

}  // namespace

std::filesystem::path test_servers_state_dir() {
  if (auto directory = environment("DLOCK_TEST_STATE_DIR")) return *directory;
  return DLOCK_TEST_STATE_DIR;
}

std::optional<std::string> test_server_endpoint(std::string_view variable) {
  if (auto value = environment(std::string(variable).c_str())) return value;
  return value_in_file(endpoints_file(), variable);
}

std::string require_test_server_endpoint(std::string_view variable) {
  if (auto value = test_server_endpoint(variable)) return *value;
  throw std::runtime_error(std::string(variable) + " is neither in the environment nor in " +
                           endpoints_file().string() +
                           "; start the servers with: " + DLOCK_TEST_SERVERS_SCRIPT +
                           " --state-dir " + test_servers_state_dir().string() + " start");
}

std::vector<host_port> endpoint_hosts(std::string_view url) {
  if (auto scheme_end = url.find("://"); scheme_end != std::string_view::npos) {
    url.remove_prefix(scheme_end + 3);
  }
  if (auto at = url.find('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  url = url.substr(0, url.find_first_of("/?"));
  std::vector<host_port> hosts;
  while (!url.empty()) {
    const std::string_view host = url.substr(0, url.find(','));
    url.remove_prefix(std::min(url.size(), host.size() + 1));
    const auto colon = host.rfind(':');
    if (colon == std::string_view::npos) {
      throw std::invalid_argument("endpoint host '" + std::string(host) + "' has no port");
    }
    hosts.push_back(
        {std::string(host.substr(0, colon)), std::stoi(std::string(host.substr(colon + 1)))});
  }
  return hosts;
}

script_result run_test_servers_script(const std::vector<std::string>& arguments,
                                      std::chrono::seconds timeout) {
  std::vector<std::string> argv{"/bin/sh",
                                "-c",
                                "exec \"$0\" \"$@\" 2>&1",
                                DLOCK_TEST_SERVERS_SCRIPT,
                                "--state-dir",
                                test_servers_state_dir().string()};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  child_process script(std::move(argv));
  script.close_stdin();
  script_result result;
  result.output = script.read_all(timeout);
  if (auto status = script.wait(timeout)) result.exit_code = exit_code(*status);
  return result;
}

void test_servers(const std::vector<std::string>& arguments) {
  const script_result result = run_test_servers_script(arguments);
  if (result.exit_code != 0) {
    std::string command = "test-servers.sh";
    for (const auto& argument : arguments) command += " " + argument;
    throw std::runtime_error(command + " exited with " + std::to_string(result.exit_code) + ":\n" +
                             result.output);
  }
}

undo_test_servers_fault::undo_test_servers_fault(std::vector<std::string> arguments)
    : arguments_(std::move(arguments)) {}

void undo_test_servers_fault::now() {
  done_ = true;
  test_servers(arguments_);
}

undo_test_servers_fault::~undo_test_servers_fault() {
  if (done_) return;
  try {
    test_servers(arguments_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "undoing a test server fault failed: %s\n", e.what());
  }
}

}  // namespace support
