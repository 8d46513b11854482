#include "zookeeper_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "support.hpp"

namespace support {

namespace {

// Closes a file descriptor on scope exit.
struct socket_guard {
  int fd;
  ~socket_guard() { ::close(fd); }
};

std::runtime_error zookeeper_failure(const std::string& what, int rc) {
  return std::runtime_error("zookeeper: " + what + ": " + zerror(rc));
}

}  // namespace

std::string zookeeper_hosts(std::string_view url) {
  std::string hosts;
  for (const auto& at : endpoint_hosts(url)) {
    hosts += (hosts.empty() ? "" : ",") + at.host + ":" + std::to_string(at.port);
  }
  return hosts;
}

struct zookeeper_session::answer {
  static constexpr int pending = 1;  // ZooKeeper's codes are 0 or negative
  int rc = pending;
  std::string data;
  std::vector<std::string> children;
  Stat stat{};

  static answer& of(const void* data) { return *static_cast<answer*>(const_cast<void*>(data)); }
  static void on_void(int rc, const void* data) { of(data).rc = rc; }
  static void on_string(int rc, const char*, const void* data) { of(data).rc = rc; }
  static void on_stat(int rc, const Stat* stat, const void* data) {
    if (stat) of(data).stat = *stat;
    of(data).rc = rc;
  }
  static void on_data(int rc, const char* value, int length, const Stat*, const void* data) {
    if (value && length > 0) of(data).data.assign(value, static_cast<std::size_t>(length));
    of(data).rc = rc;
  }
  static void on_children(int rc, const String_vector* found, const void* data) {
    if (found) of(data).children.assign(found->data, found->data + found->count);
    of(data).rc = rc;
  }
};

zookeeper_session::zookeeper_session(const std::string& hosts, std::chrono::milliseconds timeout) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  handle_ = zookeeper_init(hosts.c_str(), &on_event, 4000, nullptr, this, 0);
  if (!handle_) throw std::runtime_error("zookeeper " + hosts + ": zookeeper_init failed");
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    zookeeper_close(handle_);
    throw std::runtime_error("zookeeper: eventfd failed");
  }
  pump_thread_ = std::thread([this] { pump(); });
  std::unique_lock lock(mutex_);
  const auto connected = [&] { return zoo_state(handle_) == ZOO_CONNECTED_STATE; };
  if (!changed_.wait_for(lock, timeout, connected)) {
    lock.unlock();
    close();
    throw std::runtime_error("zookeeper " + hosts + ": no session within " +
                             std::to_string(timeout.count()) + " ms");
  }
}

zookeeper_session::~zookeeper_session() { close(); }

void zookeeper_session::close() noexcept {
  if (!pump_thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake();
  pump_thread_.join();
  if (handle_) zookeeper_close(handle_);
  ::close(wake_fd_);
}

void zookeeper_session::on_event(zhandle_t*, int, int, const char*, void* context) {
  static_cast<zookeeper_session*>(context)->changed_.notify_all();
}

void zookeeper_session::wake() const {
  const std::uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof one);
}

void zookeeper_session::pump() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    int fd = -1;
    int interest = 0;
    timeval tv{};
    // Not ZOK while the client connects again (then tv still says when to ask again), or for
    // good once the session expired or was closed: then only a wake matters.
    const int rc = handle_ ? zookeeper_interest(handle_, &fd, &interest, &tv) : ZCLOSING;
    if (rc != ZOK) fd = -1;
    const auto wait = std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
    // Rounded up: a wait of 0.4 ms must not become a busy loop of zero-timeout polls.
    const int millis =
        rc == ZOK ? static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count())
                  : 20;
    pollfd watched[2] = {{.fd = wake_fd_, .events = POLLIN, .revents = 0},
                         {.fd = fd, .events = 0, .revents = 0}};
    if (interest & ZOOKEEPER_READ) watched[1].events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) watched[1].events |= POLLOUT;
    lock.unlock();
    ::poll(watched, fd >= 0 ? 2 : 1, millis);
    lock.lock();
    std::uint64_t wakes = 0;
    (void)::read(wake_fd_, &wakes, sizeof wakes);
    int events = 0;
    if (watched[1].revents & (POLLIN | POLLERR | POLLHUP)) events |= ZOOKEEPER_READ;
    if (watched[1].revents & (POLLOUT | POLLERR | POLLHUP)) events |= ZOOKEEPER_WRITE;
    if (handle_ && events) zookeeper_process(handle_, events);  // runs the completions
    changed_.notify_all();
  }
}

void zookeeper_session::ask(const std::function<int(zhandle_t*, answer*)>& start, answer& reply,
                            std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!handle_) throw std::runtime_error("zookeeper: the session was closed after a timeout");
  const int rc = start(handle_, &reply);
  if (rc != ZOK) {
    reply.rc = rc;
    return;
  }
  wake();  // the client may have left part of the request to send when writable
  if (!changed_.wait_for(lock, timeout, [&] { return reply.rc != answer::pending; })) {
    // Closing runs the pending completions (ZCLOSING): none can write into `reply` later.
    zookeeper_close(std::exchange(handle_, nullptr));
    throw std::runtime_error("zookeeper: no answer within " + std::to_string(timeout.count()) +
                             " ms");
  }
}

int zookeeper_session::create_and_delete(const std::string& path) {
  int rc = create(path);
  if (rc != ZOK) return rc;
  if (czxid(path) < 0) return ZNONODE;
  if ((rc = remove(path)) != ZOK) return rc;
  return czxid(path) < 0 ? ZOK : ZNODEEXISTS;
}

std::vector<std::string> zookeeper_session::children(const std::string& path) {
  answer reply;
  ask([&](zhandle_t* zh, answer* to) {
        return zoo_aget_children(zh, path.c_str(), 0, &answer::on_children, to);
      },
      reply, std::chrono::seconds(10));
  if (reply.rc == ZNONODE) return {};
  if (reply.rc != ZOK) throw zookeeper_failure("get_children " + path, reply.rc);
  return reply.children;
}

std::int64_t zookeeper_session::czxid(const std::string& path) {
  answer reply;
  ask([&](zhandle_t* zh, answer* to) {
        return zoo_aexists(zh, path.c_str(), 0, &answer::on_stat, to);
      },
      reply, std::chrono::seconds(10));
  return reply.rc == ZOK ? reply.stat.czxid : -1;
}

int zookeeper_session::create(const std::string& path) {
  answer reply;
  ask([&](zhandle_t* zh, answer* to) {
        return zoo_acreate(zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, &answer::on_string,
                           to);
      },
      reply, std::chrono::seconds(10));
  return reply.rc;
}

int zookeeper_session::remove(const std::string& path) {
  return call([&](zhandle_t* zh, void_completion_t completion, const void* data) {
    return zoo_adelete(zh, path.c_str(), -1, completion, data);
  });
}

void zookeeper_session::sync(std::chrono::milliseconds timeout) {
  answer reply;
  ask([](zhandle_t* zh, answer* to) { return zoo_async(zh, "/", &answer::on_string, to); },
      reply, timeout);
  if (reply.rc != ZOK) throw zookeeper_failure("sync", reply.rc);
}

void zookeeper_session::add_digest_auth(const std::string& credentials) {
  const int rc = call([&](zhandle_t* zh, void_completion_t completion, const void* data) {
    return zoo_add_auth(zh, "digest", credentials.data(), static_cast<int>(credentials.size()),
                        completion, data);
  });
  if (rc != ZOK) throw zookeeper_failure("zoo_add_auth", rc);
}

std::string zookeeper_session::data(const std::string& path) {
  answer reply;
  ask([&](zhandle_t* zh, answer* to) {
        return zoo_aget(zh, path.c_str(), 0, &answer::on_data, to);
      },
      reply, std::chrono::seconds(10));
  if (reply.rc != ZOK) throw zookeeper_failure("get " + path, reply.rc);
  return reply.data;
}

int zookeeper_session::call(const void_call& start, std::chrono::milliseconds timeout) {
  answer reply;
  ask([&](zhandle_t* zh, answer* to) { return start(zh, &answer::on_void, to); }, reply,
      timeout);
  return reply.rc;
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
