// Why no ZooKeeper server answered: a server that closes new connections at once (as one over
// its maxClientCnxns does) is named in the message; a silent or absent one is not. The probe
// is told apart with real sockets here; against a real server limited to one connection per
// address, docs/zookeeper.md shows the message.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <string>
#include <thread>

#include "refusal_probe.hpp"

using namespace std::chrono_literals;
using dlock::zookeeper::detail::refusal_hint;

namespace {

// A listener on a free loopback port; with `close_at_once`, a thread closes each connection
// as soon as it is accepted.
class listener {
 public:
  explicit listener(bool close_at_once) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    if (close_at_once) {
      closer_ = std::thread([fd = fd_] {
        for (int client; (client = ::accept(fd, nullptr, nullptr)) >= 0;) ::close(client);
      });
    }
  }
  ~listener() {
    ::shutdown(fd_, SHUT_RDWR);  // ends the closer's accept()
    if (closer_.joinable()) closer_.join();
    ::close(fd_);
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
  std::thread closer_;
};

}  // namespace

TEST_CASE("a server that closes new connections at once is named as refusing them",
          "[zookeeper][errors]") {
  listener refusing(true);
  listener silent(false);
  // The silent one first: it costs the whole wait, and must not be named.
  const std::string hint = refusal_hint(silent.host() + "," + refusing.host(), 1s);
  CHECK(hint.find(refusing.host() + " closed the connection at once") != std::string::npos);
  CHECK(hint.find("maxClientCnxns") != std::string::npos);
  CHECK(hint.find(silent.host()) == std::string::npos);
}

TEST_CASE("a silent server or a closed port gets no refusal hint", "[zookeeper][errors]") {
  listener silent(false);
  CHECK(refusal_hint(silent.host(), 100ms).empty());
  int closed_port;
  {
    listener gone(false);
    closed_port = std::stoi(gone.host().substr(gone.host().rfind(':') + 1));
  }
  CHECK(refusal_hint("127.0.0.1:" + std::to_string(closed_port), 100ms).empty());
}
