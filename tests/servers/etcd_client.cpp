#include "etcd_client.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace support {

namespace {

std::string read_all(int fd) {
  std::string text;
  std::array<char, 4096> buffer;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return text;
    }
  }
}

}  // namespace

std::string etcd_endpoints(std::string_view url) {
  std::string endpoints;
  for (const host_port& h : endpoint_hosts(url)) {
    if (!endpoints.empty()) endpoints += ',';
    endpoints += h.host + ":" + std::to_string(h.port);
  }
  return endpoints;
}

std::string etcdctl(const std::string& endpoints, const std::vector<std::string>& arguments) {
  std::vector<std::string> words{"etcdctl", "--endpoints=" + endpoints, "--command-timeout=5s"};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int out[2];
  int err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) throw std::system_error(errno, std::generic_category());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "etcdctl", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error(std::string("etcdctl could not be started: ") + std::strerror(rc));
  }
  // etcdctl's output is small: read stdout to its end, then stderr.
  std::string output = read_all(out[0]);
  std::string errors = read_all(err[0]);
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("etcdctl " + words[3] + " failed: " + errors);
  }
  return output;
}

std::vector<std::string> etcd_keys(const std::string& endpoints, const std::string& prefix) {
  const std::string output = etcdctl(endpoints, {"get", "--prefix", "--keys-only", prefix});
  std::vector<std::string> keys;
  std::size_t begin = 0;
  while (begin < output.size()) {
    std::size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    if (end > begin) keys.push_back(output.substr(begin, end - begin));
    begin = end + 1;
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace support
