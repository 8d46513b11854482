// The ZooKeeper calls of zk_session (session.hpp): each becomes a route (completion_routes.hpp)
// and one asynchronous C client call in the current session, made through the pump's lock
// (client_pump::submit); a call made inside the client's processing is queued, so each call's
// lambda holds copies of its arguments.
#include <utility>

#include <boost/asio/post.hpp>

#include "session.hpp"

namespace dlock::zookeeper::detail {

boost::asio::any_io_executor zk_session::answers_on(bool client_thread) const {
  return client_thread ? boost::asio::any_io_executor() : executor_;
}

void zk_session::issue(std::uint64_t route_id, client_call call) {
  pump_->submit([route_id, call = std::move(call)](zhandle_t* handle) {
    const int rc = handle ? call(handle, route_context(route_id)) : ZINVALIDSTATE;
    if (rc != ZOK) deliver(route_id, {.rc = rc});
  });
}

void zk_session::create(const std::string& path, bool sequential_ephemeral, zk_handler then,
                        const std::string& data, bool answer_on_client_thread) {
  const auto id = add_route(answers_on(answer_on_client_thread), std::move(then));
  const int flags = sequential_ephemeral ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_CONTAINER;
  issue(id, [this, path, data, flags](zhandle_t* handle, const void* context) {
    return zoo_acreate2(handle, path.c_str(), data.data(), static_cast<int>(data.size()), &acl_,
                        flags, on_create_completion, context);
  });
}

void zk_session::create_ttl(const std::string& path, const std::string& data,
                            std::chrono::milliseconds ttl, zk_handler then,
                            bool answer_on_client_thread) {
  const auto id = add_route(answers_on(answer_on_client_thread), std::move(then));
  issue(id, [this, path, data, ttl = ttl.count()](zhandle_t* handle, const void* context) {
    return zoo_acreate2_ttl(handle, path.c_str(), data.data(), static_cast<int>(data.size()),
                            &acl_, ZOO_PERSISTENT_WITH_TTL, ttl, on_create_completion, context);
  });
}

void zk_session::ensure_path(const std::string& path, zk_handler then, std::string leaf_data) {
  // Creates each missing ancestor and then `path` as container nodes, top down; a node
  // that exists already (made by someone else meanwhile) is fine.
  std::vector<std::string> prefixes;
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    prefixes.push_back(path.substr(0, at));
  }
  prefixes.push_back(path);
  struct chain {
    std::weak_ptr<zk_session> session;
    std::vector<std::string> paths;
    std::string leaf_data;
    std::size_t next = 0;
    zk_handler then;
    static void step(std::shared_ptr<chain> c) {
      auto session = c->session.lock();
      if (!session) return;
      if (c->next == c->paths.size()) return c->then({.rc = ZOK});
      const bool leaf = c->next + 1 == c->paths.size();
      const std::string& path = c->paths[c->next++];
      session->create(path, false, [c](zk_reply reply) {
        // The server reaps an emptied container node: one seen a moment ago can be gone before
        // its child is created. Start again from the top, where only a missing chroot is final.
        if (reply.rc == ZNONODE && c->next > 1) {
          c->next = 0;
          return step(c);
        }
        if (reply.rc != ZOK && reply.rc != ZNODEEXISTS) return c->then(std::move(reply));
        step(c);
      }, leaf ? c->leaf_data : std::string());
    }
  };
  chain::step(std::make_shared<chain>(
      chain{weak_from_this(), std::move(prefixes), std::move(leaf_data), 0, std::move(then)}));
}

void zk_session::read(const std::string& path, zk_handler then, zk_handler* on_change,
                      std::uint64_t* watch_id, const read_call& call,
                      bool answer_on_client_thread) {
  const auto id = add_route(answers_on(answer_on_client_thread), std::move(then));
  void* watch_context = nullptr;
  if (on_change) {
    *watch_id = add_route(executor_, std::move(*on_change));
    watch_context = const_cast<void*>(route_context(*watch_id));
  }
  const watcher_fn watcher = on_change ? on_watch_event : nullptr;
  issue(id, [call, path, watcher, watch_context](zhandle_t* handle, const void* context) {
    return call(handle, path.c_str(), watcher, watch_context, context);
  });
}

void zk_session::get_children(const std::string& path, zk_handler then, zk_handler* on_change,
                              std::uint64_t* watch_id, bool answer_on_client_thread) {
  read(path, std::move(then), on_change, watch_id,
       [](zhandle_t* handle, const char* node, watcher_fn watcher, void* watch_context,
          const void* context) {
         return zoo_awget_children(handle, node, watcher, watch_context, on_children_completion,
                                   context);
       },
       answer_on_client_thread);
}

void zk_session::exists(const std::string& path, zk_handler then, zk_handler* on_change,
                        std::uint64_t* watch_id, bool answer_on_client_thread) {
  read(path, std::move(then), on_change, watch_id,
       [](zhandle_t* handle, const char* node, watcher_fn watcher, void* watch_context,
          const void* context) {
         return zoo_awexists(handle, node, watcher, watch_context, on_stat_completion, context);
       },
       answer_on_client_thread);
}

void zk_session::get_data(const std::string& path, zk_handler then,
                          bool answer_on_client_thread) {
  const auto id = add_route(answers_on(answer_on_client_thread), std::move(then));
  issue(id, [path](zhandle_t* handle, const void* context) {
    return zoo_aget(handle, path.c_str(), 0, on_data_completion, context);
  });
}

void zk_session::set_data(const std::string& path, const std::string& data,
                          std::int32_t version, zk_handler then, bool answer_on_client_thread) {
  const auto id = add_route(answers_on(answer_on_client_thread), std::move(then));
  issue(id, [path, data, version](zhandle_t* handle, const void* context) {
    return zoo_aset(handle, path.c_str(), data.data(), static_cast<int>(data.size()), version,
                    on_stat_completion, context);
  });
}

void zk_session::sync(const std::string& path, zk_handler then, bool answer_on_client_thread) {
  const auto id = add_route(answers_on(answer_on_client_thread), std::move(then));
  issue(id, [path](zhandle_t* handle, const void* context) {
    return zoo_async(handle, path.c_str(), on_string_completion, context);
  });
}

void zk_session::remove(const std::string& path, zk_handler then) {
  const auto id = add_route(
      executor_, [weak = weak_from_this(), path, then = std::move(then)](zk_reply reply) {
        if (is_connection_loss(reply.rc)) {
          if (auto self = weak.lock()) self->pending_removes_.push_back(path);
        }
        then(std::move(reply));
      });
  issue(id, [path](zhandle_t* handle, const void* context) {
    return zoo_adelete(handle, path.c_str(), -1, on_void_completion, context);
  });
}

std::optional<int> zk_session::remove_and_wait(const std::string& path,
                                               std::chrono::nanoseconds timeout) {
  blocking_reply<int> answer;
  // Runs inside the client's processing of the answer: it only hands the code over (and a
  // cut-off delete on to be retried).
  const auto id = add_route({}, [answer, weak = weak_from_this(), path](zk_reply reply) {
    if (is_connection_loss(reply.rc)) {
      if (auto self = weak.lock()) {
        boost::asio::post(self->executor_, [weak, path] {
          if (auto session = weak.lock()) session->pending_removes_.push_back(path);
        });
      }
    }
    answer.set_value(int{reply.rc});
  });
  issue(id, [path](zhandle_t* handle, const void* context) {
    return zoo_adelete(handle, path.c_str(), -1, on_void_completion, context);
  });
  std::optional<int> rc;
  await(
      [&](std::chrono::nanoseconds wait) {
        if (!rc) rc = answer.get_within(wait);
        return rc.has_value();
      },
      std::chrono::steady_clock::now() + timeout);
  return rc;
}

void zk_session::retry_pending_removes() {
  for (const std::string& path : std::exchange(pending_removes_, {})) {
    remove(path, [](zk_reply) {});
  }
}

}  // namespace dlock::zookeeper::detail
