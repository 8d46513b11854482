#include "zookeeper_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <memory>
#include <stdexcept>

#include "support.hpp"

namespace support {

namespace {

void ignore_events(zhandle_t*, int, int, const char*, void*) {}

// Closes a file descriptor on scope exit.
struct socket_guard {
  int fd;
  ~socket_guard() { ::close(fd); }
};

}  // namespace

std::string zookeeper_hosts(std::string_view url) {
  std::string hosts;
  for (const auto& at : endpoint_hosts(url)) {
    hosts += (hosts.empty() ? "" : ",") + at.host + ":" + std::to_string(at.port);
  }
  return hosts;
}

void zookeeper_session::handle_deleter::operator()(zhandle_t* handle) const {
  zookeeper_close(handle);
}

zookeeper_session::zookeeper_session(const std::string& hosts, std::chrono::milliseconds timeout) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  handle_.reset(zookeeper_init(hosts.c_str(), &ignore_events, 4000, nullptr, nullptr, 0));
  if (!handle_) throw std::runtime_error("zookeeper " + hosts + ": zookeeper_init failed");
  if (!wait_until([&] { return zoo_state(handle_.get()) == ZOO_CONNECTED_STATE; }, timeout)) {
    throw std::runtime_error("zookeeper " + hosts + ": no session within " +
                             std::to_string(timeout.count()) + " ms");
  }
}

zookeeper_session::~zookeeper_session() = default;

int zookeeper_session::create_and_delete(const std::string& path) {
  char created[1024];
  int rc = zoo_create(handle_.get(), path.c_str(), "dlock", 5, &ZOO_OPEN_ACL_UNSAFE, 0, created,
                      sizeof created);
  if (rc != ZOK) return rc;
  Stat stat;
  if ((rc = zoo_exists(handle_.get(), path.c_str(), 0, &stat)) != ZOK) return rc;
  if ((rc = zoo_delete(handle_.get(), path.c_str(), -1)) != ZOK) return rc;
  rc = zoo_exists(handle_.get(), path.c_str(), 0, &stat);
  return rc == ZNONODE ? ZOK : (rc == ZOK ? ZNODEEXISTS : rc);
}

std::vector<std::string> zookeeper_session::children(const std::string& path) {
  String_vector found{};
  const int rc = zoo_get_children(handle_.get(), path.c_str(), 0, &found);
  if (rc == ZNONODE) return {};
  if (rc != ZOK) throw std::runtime_error("zookeeper: get_children " + path + ": " + zerror(rc));
  std::vector<std::string> names(found.data, found.data + found.count);
  deallocate_String_vector(&found);
  return names;
}

std::int64_t zookeeper_session::czxid(const std::string& path) {
  Stat stat{};
  return zoo_exists(handle_.get(), path.c_str(), 0, &stat) == ZOK ? stat.czxid : -1;
}

int zookeeper_session::create(const std::string& path) {
  return zoo_create(handle_.get(), path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
}

int zookeeper_session::remove(const std::string& path) {
  return zoo_delete(handle_.get(), path.c_str(), -1);
}

void zookeeper_session::sync(std::chrono::milliseconds timeout) {
  // The completion runs on the client's thread, maybe after a timeout here: it owns a reference.
  struct outcome {
    std::atomic<int> rc{1};  // 1: no answer yet (ZooKeeper's codes are 0 or negative)
  };
  auto state = std::make_shared<outcome>();
  auto* reference = new std::shared_ptr<outcome>(state);
  const int rc = zoo_async(
      handle_.get(), "/",
      [](int answer, const char*, const void* data) {
        auto* owned = static_cast<std::shared_ptr<outcome>*>(const_cast<void*>(data));
        (*owned)->rc = answer;
        delete owned;
      },
      reference);
  if (rc != ZOK) {
    delete reference;
    throw std::runtime_error(std::string("zookeeper: sync: ") + zerror(rc));
  }
  if (!wait_until([&] { return state->rc.load() != 1; }, timeout)) {
    throw std::runtime_error("zookeeper: sync: no answer in time");
  }
  if (state->rc.load() != ZOK) {
    throw std::runtime_error(std::string("zookeeper: sync: ") + zerror(state->rc.load()));
  }
}

void zookeeper_session::add_digest_auth(const std::string& credentials) {
  const int rc = zoo_add_auth(handle_.get(), "digest", credentials.data(),
                              static_cast<int>(credentials.size()), nullptr, nullptr);
  if (rc != ZOK) throw std::runtime_error(std::string("zookeeper: zoo_add_auth: ") + zerror(rc));
}

std::optional<std::string> zookeeper_four_letter_word(int port, std::string_view word,
                                                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  socket_guard socket{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (socket.fd < 0) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // A connect to loopback completes at once, even to a paused server (the kernel accepts).
  if (::connect(socket.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return std::nullopt;
  }
  if (::send(socket.fd, word.data(), word.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(word.size())) {
    return std::nullopt;
  }
  std::string reply;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd readable{socket.fd, POLLIN, 0};
    if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::recv(socket.fd, chunk, sizeof chunk, 0);
    if (got < 0) return std::nullopt;
    if (got == 0) return reply;
    reply.append(chunk, static_cast<std::size_t>(got));
  }
}

std::string zookeeper_mode(int port, std::chrono::milliseconds timeout) {
  const auto reply = zookeeper_four_letter_word(port, "srvr", timeout);
  if (!reply) return "";
  const auto start = reply->find("Mode: ");
  if (start == std::string::npos) return "";
  const auto value = start + 6;
  return reply->substr(value, reply->find('\n', value) - value);
}

}  // namespace support
