#include "refusal_probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

namespace dlock::zookeeper::detail {

namespace {

class socket_fd {
 public:
  explicit socket_fd(int fd) : fd_(fd) {}
  ~socket_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int millis(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

bool closes_at_once(const addrinfo& address, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  socket_fd s(::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       address.ai_protocol));
  if (s.get() < 0) return false;
  if (::connect(s.get(), address.ai_addr, address.ai_addrlen) != 0 && errno != EINPROGRESS) {
    return false;
  }
  pollfd connected{s.get(), POLLOUT, 0};
  if (::poll(&connected, 1, millis(deadline)) != 1) return false;
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
    return false;  // refused or unreachable: the usual message says enough
  }
  pollfd closed{s.get(), POLLIN | POLLRDHUP, 0};
  if (::poll(&closed, 1, millis(deadline)) != 1) return false;  // waits for us: takes clients
  char byte;
  const ssize_t got = ::recv(s.get(), &byte, 1, 0);
  return got == 0 || (got < 0 && errno == ECONNRESET);
}

bool closes_at_once(const std::string& host_port, std::chrono::milliseconds wait) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return false;
  bool closes = false;
  for (const addrinfo* a = found; a && !closes; a = a->ai_next) closes = closes_at_once(*a, wait);
  ::freeaddrinfo(found);
  return closes;
}

}  // namespace

std::string refusal_hint(const std::string& hosts, std::chrono::milliseconds wait) {
  std::istringstream list(hosts);
  for (std::string host; std::getline(list, host, ',');) {
    if (closes_at_once(host, wait)) {
      return " (" + host +
             " closed the connection at once, before the client said anything: too many "
             "connections from this address for the server's maxClientCnxns?)";
    }
  }
  return {};
}

}  // namespace dlock::zookeeper::detail
