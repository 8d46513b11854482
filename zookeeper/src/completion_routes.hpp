// Private to dlock::zookeeper: how the C client's completions and watch events reach C++.
//
// The C client takes a `const void*` context per call. Passing a pointer to a C++ object
// would leave it dangling (or leaking) for watches that never fire, so the context is a
// number instead: a route registered here, looked up and dropped when the completion or the
// event arrives. A route whose owner is gone is simply not found.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include "c_client.hpp"

namespace dlock::zookeeper::detail {

/// What a ZooKeeper call or watch reported.
struct zk_reply {
  int rc = ZOK;                        ///< the call's code; ZOK for watch events
  int event = 0;                       ///< watch events: ZOO_DELETED_EVENT, ...
  std::string path;                    ///< create: the node created
  std::string data;                    ///< get: the node's data
  std::vector<std::string> children;   ///< get_children
  std::int64_t czxid = 0;              ///< create, exists, get, set
  std::int64_t ctime = 0;              ///< exists, get, set: creation time, ms since the epoch
  std::int32_t version = 0;            ///< exists, get, set: the data's version
};

using zk_handler = std::function<void(zk_reply)>;

/// The call's answer was cut off with the connection: it may or may not have happened.
inline bool is_connection_loss(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }
/// The session this call belonged to is gone: its ephemeral nodes went with it.
inline bool is_session_gone(int rc) { return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE; }

/// Registers `handler` and returns its route id. With an `executor`, the handler is posted
/// there; without one it runs inside the client's processing of the answer (on the io
/// thread, in client_pump) and must not block nor call the client.
std::uint64_t add_route(boost::asio::any_io_executor executor, zk_handler handler);
/// Forgets a route (a watch no longer wanted). No-op for an unknown id.
void drop_route(std::uint64_t id);
/// Delivers `reply` to route `id` once (the route is dropped).
void deliver(std::uint64_t id, zk_reply reply);

/// The answers of two calls sent back to back, which the server answers together (a create
/// and the listing pipelined behind it): returns the handlers to give the two calls, to run
/// inside the client's processing. The first answer to come is kept there; the second posts
/// one handler to `executor` that runs `first` and then `second` with their answers: the
/// recipe moves on once, with both.
std::pair<zk_handler, zk_handler> joined_answers(boost::asio::any_io_executor executor,
                                                 zk_handler first, zk_handler second);

inline const void* route_context(std::uint64_t id) {
  return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(id));
}

// The C callbacks: each delivers to the route its context names.
void on_void_completion(int rc, const void* context);
void on_stat_completion(int rc, const struct Stat* stat, const void* context);
void on_create_completion(int rc, const char* path, const struct Stat* stat, const void* context);
void on_data_completion(int rc, const char* value, int value_length, const struct Stat* stat,
                        const void* context);
/// A sync's answer (zoo_async).
void on_string_completion(int rc, const char* value, const void* context);
void on_children_completion(int rc, const struct String_vector* children, const void* context);
/// Watch events of a node or its children; session events other than expiry are ignored
/// (the client keeps the watch and sets it again after reconnecting).
void on_watch_event(zhandle_t* handle, int type, int state, const char* path, void* context);

}  // namespace dlock::zookeeper::detail
