#include "completion_routes.hpp"
#include "test_seams.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include <boost/asio/post.hpp>

namespace dlock::zookeeper::detail {

namespace {

struct route {
  boost::asio::any_io_executor executor;
  zk_handler handler;
};

struct route_table {
  std::mutex mutex;
  std::uint64_t next_id = 0;
  std::unordered_map<std::uint64_t, route> routes;
};

route_table& table() {
  static route_table instance;
  return instance;
}

std::uint64_t id_of(const void* context) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(context));
}

std::atomic<create_answer_filter> create_filter{nullptr};

}  // namespace

std::uint64_t add_route(boost::asio::any_io_executor executor, zk_handler handler) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  const std::uint64_t id = ++t.next_id;
  t.routes.emplace(id, route{std::move(executor), std::move(handler)});
  return id;
}

void drop_route(std::uint64_t id) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  t.routes.erase(id);
}

void deliver(std::uint64_t id, zk_reply reply) {
  route found;
  {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    auto it = t.routes.find(id);
    if (it == t.routes.end()) return;
    found = std::move(it->second);
    t.routes.erase(it);
  }
  if (found.executor) {
    boost::asio::post(found.executor, [handler = std::move(found.handler),
                                       reply = std::move(reply)]() mutable {
      handler(std::move(reply));
    });
  } else {
    found.handler(std::move(reply));
  }
}

std::pair<zk_handler, zk_handler> joined_answers(boost::asio::any_io_executor executor,
                                                 zk_handler first, zk_handler second) {
  struct joined {
    std::mutex mutex;
    boost::asio::any_io_executor executor;
    std::array<zk_handler, 2> handlers;
    std::array<std::optional<zk_reply>, 2> replies;

    void keep(std::size_t which, zk_reply reply) {
      {
        std::lock_guard lock(mutex);
        replies[which] = std::move(reply);
        if (!replies[1 - which]) return;
      }
      // Both answers are in, and this thread alone still sees the state.
      boost::asio::post(executor, [handlers = std::move(handlers),
                                   replies = std::move(replies)]() mutable {
        handlers[0](std::move(*replies[0]));
        handlers[1](std::move(*replies[1]));
      });
    }
  };
  auto state = std::make_shared<joined>();
  state->executor = std::move(executor);
  state->handlers[0] = std::move(first);
  state->handlers[1] = std::move(second);
  return {[state](zk_reply reply) { state->keep(0, std::move(reply)); },
          [state](zk_reply reply) { state->keep(1, std::move(reply)); }};
}

void on_void_completion(int rc, const void* context) { deliver(id_of(context), {.rc = rc}); }

namespace {

zk_reply with_stat(int rc, const struct Stat* stat) {
  zk_reply reply{.rc = rc};
  if (stat) {
    reply.czxid = stat->czxid;
    reply.ctime = stat->ctime;
    reply.version = stat->version;
  }
  return reply;
}

}  // namespace

void on_stat_completion(int rc, const struct Stat* stat, const void* context) {
  deliver(id_of(context), with_stat(rc, stat));
}

void on_string_completion(int rc, const char*, const void* context) {
  deliver(id_of(context), {.rc = rc});
}

void set_create_answer_filter(create_answer_filter filter) noexcept { create_filter = filter; }

void on_create_completion(int rc, const char* path, const struct Stat* stat,
                          const void* context) {
  if (auto filter = create_filter.load(); filter && rc == ZOK && path && filter(path)) {
    rc = ZCONNECTIONLOSS;
    path = nullptr;
    stat = nullptr;
  }
  deliver(id_of(context),
          {.rc = rc, .path = path ? path : "", .czxid = stat ? stat->czxid : 0});
}

void on_data_completion(int rc, const char* value, int value_length, const struct Stat* stat,
                        const void* context) {
  zk_reply reply = with_stat(rc, stat);
  if (rc == ZOK && value && value_length > 0) {
    reply.data.assign(value, static_cast<std::size_t>(value_length));
  }
  deliver(id_of(context), std::move(reply));
}

void on_children_completion(int rc, const struct String_vector* children, const void* context) {
  zk_reply reply{.rc = rc};
  if (rc == ZOK && children) {
    reply.children.reserve(static_cast<std::size_t>(children->count));
    for (int i = 0; i < children->count; ++i) reply.children.emplace_back(children->data[i]);
  }
  deliver(id_of(context), std::move(reply));
}

void on_watch_event(zhandle_t*, int type, int state, const char* path, void* context) {
  if (type == ZOO_SESSION_EVENT && state != ZOO_EXPIRED_SESSION_STATE) return;
  deliver(id_of(context), {.rc = ZOK, .event = type, .path = path ? path : ""});
}

}  // namespace dlock::zookeeper::detail
