// The partition harness does what it says (scripts/partition-net.sh): a cut path is silent in
// both directions while the other path to the same server answers, a new connect over it fails
// within seconds, and a heal brings the very same connection back.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>

#include "partition_servers.hpp"
#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using support::net_path;

// Each server of the set under the endpoint variable that names it, in its order there.
const std::map<std::string, std::vector<std::string>>& servers_by_backend() {
  static const std::map<std::string, std::vector<std::string>> servers{
      {"REDIS", {"redis"}},
      {"REDLOCK", {"redlock1", "redlock2", "redlock3"}},
      {"POSTGRES", {"postgres"}},
      {"ZOOKEEPER", {"zookeeper"}},
      {"ZOOKEEPER_ENSEMBLE", {"zk1", "zk2", "zk3"}}};
  return servers;
}

// Server id -> its host:port over `path`, for every server group the set runs.
std::map<std::string, support::host_port> addresses(const support::partition_servers& set,
                                                    net_path path) {
  std::map<std::string, support::host_port> found;
  for (const auto& [backend, ids] : servers_by_backend()) {
    std::string url;
    try {
      url = set.url(backend, path);
    } catch (const std::runtime_error&) {
      continue;  // that group is not built here
    }
    const auto hosts = support::endpoint_hosts(url);
    for (std::size_t i = 0; i < ids.size(); ++i) found[ids[i]] = hosts.at(i);
  }
  return found;
}

// A plain TCP connection that sends Redis inline commands and reads replies with a deadline.
class raw_connection {
 public:
  explicit raw_connection(const support::host_port& at) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(at.port));
    ::inet_pton(AF_INET, at.host.c_str(), &address.sin_addr);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      throw std::runtime_error("connect failed: " + std::string(std::strerror(errno)));
    }
  }
  ~raw_connection() { ::close(fd_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  // Whether the write was accepted by the kernel (a cut path accepts it too).
  bool send(const std::string& text) {
    return ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }

  // What arrives within `timeout` ("" when nothing does).
  std::string receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buffer[256];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    return got > 0 ? std::string(buffer, static_cast<std::size_t>(got)) : "";
  }

 private:
  int fd_ = -1;
};

}  // namespace

TEST_CASE("a cut path is silent both ways while the other path to the server answers",
          "[partition][harness]") {
  support::partition_servers set;
  const auto over_a = addresses(set, net_path::a);
  const auto over_b = addresses(set, net_path::b);
  if (!over_a.contains("redis")) {
    WARN("no Redis in the partition set: this case needs it");
    return;
  }
  raw_connection a(over_a.at("redis"));
  raw_connection b(over_b.at("redis"));
  REQUIRE(a.send("PING\r\n"));
  REQUIRE(a.receive(5s) == "+PONG\r\n");

  support::partition_cut cut(set, {"redis"}, net_path::a);
  CHECK(a.send("PING\r\n"));  // accepted by the kernel: the cut is silent, not a reset
  CHECK(a.receive(2s).empty());
  REQUIRE(b.send("PING\r\n"));
  CHECK(b.receive(5s) == "+PONG\r\n");

  // The same connection carries the queued request and its reply once the path is back.
  cut.heal();
  CHECK(a.receive(10s) == "+PONG\r\n");
  REQUIRE(a.send("PING\r\n"));
  CHECK(a.receive(5s) == "+PONG\r\n");
}

TEST_CASE("a new connect over a cut path fails within seconds and works again after the heal",
          "[partition][harness]") {
  support::partition_servers set;
  const auto over_a = addresses(set, net_path::a);
  const auto over_b = addresses(set, net_path::b);
  REQUIRE_FALSE(over_a.empty());
  // One server of each kind (each connect waits out ARP, about 3 s): every group's addresses
  // come from the same plan, so these stand for the rest.
  for (const char* name : {"redis", "redlock2", "postgres", "zookeeper", "zk3"}) {
    if (!over_a.contains(name)) continue;
    const std::string server = name;
    const auto& at = over_a.at(server);
    INFO("server " << server << " at " << at.host << ":" << at.port);
    REQUIRE(support::try_tcp_connect(at, 5s).connected);
    support::partition_cut cut(set, {server}, net_path::a);
    const auto during = support::try_tcp_connect(at, 20s);
    CHECK_FALSE(during.connected);
    CHECK(during.error == EHOSTUNREACH);
    // About 3 s (ARP's three probes), on this machine every time. The error reaches the socket
    // as a host-unreachable ICMP to ourselves, which the kernel rate-limits; one lost, the
    // retransmitted SYN takes a second round of ARP: about 10 s. A CI run once failed the old
    // bound of 5 s, its detail lost; this one still tells "within seconds" from TCP's connect
    // timeout of over two minutes.
    CHECK(during.took < 15s);
    CHECK(support::try_tcp_connect(over_b.at(server), 5s).connected);
    WARN(server << ": connect over the cut path failed after " << during.took.count() << " ms ("
                << std::strerror(during.error) << ")");
    cut.heal();
    CHECK(support::try_tcp_connect(at, 5s).connected);
  }
}

TEST_CASE("cutting one member leaves the other members reachable over the same path",
          "[partition][harness]") {
  support::partition_servers set;
  const auto over_a = addresses(set, net_path::a);
  for (const char* name : {"redlock2", "zk2"}) {
    const std::string member = name;
    if (!over_a.contains(member)) continue;
    const std::string prefix = member.substr(0, member.size() - 1);
    support::partition_cut cut(set, {member}, net_path::a);
    for (const std::string& other : std::vector<std::string>{prefix + "1", prefix + "3"}) {
      INFO(member << " cut, connecting to " << other);
      CHECK(support::try_tcp_connect(over_a.at(other), 5s).connected);
    }
    CHECK_FALSE(support::try_tcp_connect(over_a.at(member), 10s).connected);
  }
}

TEST_CASE("partition_cut cuts every server it names at once and heals them all",
          "[partition][harness]") {
  support::partition_servers set;
  const auto over_a = addresses(set, net_path::a);
  for (const char* group : {"redlock", "zk"}) {
    const std::string prefix = group;
    if (!over_a.contains(prefix + "1")) continue;
    const std::vector<std::string> cut_members{prefix + "1", prefix + "3"};
    {
      support::partition_cut cut(set, cut_members, net_path::a);
      for (const std::string& member : cut_members) {
        INFO(member << " cut with another member");
        CHECK_FALSE(support::try_tcp_connect(over_a.at(member), 10s).connected);
      }
      CHECK(support::try_tcp_connect(over_a.at(prefix + "2"), 5s).connected);
    }
    for (const std::string& member : cut_members) {
      INFO(member << " healed");
      CHECK(support::try_tcp_connect(over_a.at(member), 5s).connected);
    }
  }
}

TEST_CASE("partition_cut heals on scope exit and heal_all heals every cut path",
          "[partition][harness]") {
  support::partition_servers set;
  const auto over_a = addresses(set, net_path::a);
  const auto& [server, at] = *over_a.begin();
  INFO("server " << server);
  {
    support::partition_cut cut(set, {server}, net_path::a);
    REQUIRE_FALSE(support::try_tcp_connect(at, 10s).connected);
  }
  CHECK(support::try_tcp_connect(at, 5s).connected);

  for (const auto& [id, address] : over_a) set.cut(id, net_path::a);
  set.heal_all();
  for (const auto& [id, address] : over_a) {
    INFO("after heal_all: " << id);
    CHECK(support::try_tcp_connect(address, 5s).connected);
  }
}
