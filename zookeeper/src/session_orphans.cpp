// The orphans of zk_session (session.hpp): nodes that creates whose answers were lost may
// have made, found again by their protection prefix (node_layout.hpp) and deleted.
//
// A create cut off by the connection may or may not have happened. The acquire that sent it
// looks for its node itself once reconnected (and adopts it); when the acquire has ended
// before it could (it failed during the outage, or was withdrawn), the node would stay in
// the live session and block the name for as long as the session lasts. The session keeps
// the prefix instead, and sweeps after every reconnection until a listing has answered.
#include <utility>

#include "session.hpp"

namespace dlock::zookeeper::detail {

void zk_session::remove_orphans(const std::string& parent, const std::string& prefix) {
  orphans_.push_back({parent, prefix});
  // Disconnected: the next on_connected sweeps. Connected (or so we believe): sweep now; a
  // listing cut off by a connection loss puts the prefix back for the next reconnection.
  if (phase_ == phase::connected) sweep_orphans();
}

void zk_session::sweep_orphans() {
  for (orphan& o : std::exchange(orphans_, {})) {
    get_children(o.parent, [weak = weak_from_this(), o](zk_reply reply) {
      auto self = weak.lock();
      if (!self) return;
      if (is_connection_loss(reply.rc)) return self->remove_orphans(o.parent, o.prefix);
      // Gone (ZNONODE), or the session with it (expired): nothing of ours is left.
      if (reply.rc != ZOK) return;
      for (const std::string& child : reply.children) {
        if (child.starts_with(o.prefix)) self->remove(o.parent + "/" + child, [](zk_reply) {});
      }
    });
  }
}

}  // namespace dlock::zookeeper::detail
