// Private to dlock::zookeeper: the watch on every held lease's node.
//
// A held lease is lost when its node is deleted (by someone else, or with its session) or when
// the session loses contact for too long (zk_session reports that as contact_lost, and
// mark_all_lost() follows). A watch the connection kept from the server is set again once
// connected, so a later deletion is still reported.
//
// A lock's waiter sets that watch while it waits, beside its predecessor's (watch_early), and
// its lease adopts it: the grant, on the handoff's critical path, then sends nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <dlock/core/backend/lease.hpp>

#include "session.hpp"

namespace dlock::zookeeper::detail {

class held_watch final : public std::enable_shared_from_this<held_watch> {
 public:
  /// Posts to `executor`, the provider's io thread.
  held_watch(std::shared_ptr<zk_session> session, boost::asio::any_io_executor executor);

  /// Registers a granted lease (not yet watched); returns its id. Thread-safe.
  std::uint64_t add(dlock::lease* lease);
  /// Forgets a lease being released: its own delete then tells nobody. Thread-safe.
  void remove(std::uint64_t id);
  /// Watches held lease `id`'s node: deleted (or its session ended), the lease is lost.
  /// Called on the io thread.
  void watch(std::uint64_t id, const std::string& node);
  /// Marks every held lease lost. Thread-safe.
  void mark_all_lost();

  /// The watch on a waiting acquire's own node, set before its grant. Io thread only.
  struct early_watch {
    std::string node;
    std::uint64_t route = 0;    // the watch's route
    std::uint64_t held_id = 0;  // the lease that adopted it; 0 while its acquire waits
    bool unset = false;         // the server did not set it (or the node was gone)
    std::function<void()> deleted_while_waiting;
  };
  /// Watches `node`, whose acquire waits; `deleted_while_waiting` runs (on the io thread) if
  /// the node goes before a lease adopts the watch. Called on the io thread.
  std::shared_ptr<early_watch> watch_early(const std::string& node,
                                           std::function<void()> deleted_while_waiting);
  /// Held lease `id` takes `early` over as its watch (or watches afresh if the server did
  /// not set it). Called on the io thread.
  void adopt(std::uint64_t id, early_watch& early);
  /// The acquire ended without a grant: its early watch is forgotten. Io thread.
  static void drop(early_watch& early);

 private:
  void watch_when_connected(std::uint64_t id, const std::string& node);
  void on_node_event(std::uint64_t id, const std::string& node, int event);

  std::shared_ptr<zk_session> session_;
  boost::asio::any_io_executor executor_;

  struct held_lease {
    dlock::lease* lease;
    std::uint64_t watch_route;  // the route of the watch on its node
  };
  std::mutex mutex_;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, held_lease> held_;
};

}  // namespace dlock::zookeeper::detail
