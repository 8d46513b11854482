#include "lease.hpp"

#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::zookeeper::detail {

zookeeper_lease::zookeeper_lease(std::shared_ptr<zookeeper_backend> backend, std::string node,
                                 std::string name, std::int64_t czxid,
                                 std::shared_ptr<held_watch::early_watch> early,
                                 std::optional<min_hold_grant> hold)
    : lease(static_cast<std::uint64_t>(czxid), backend->session().validity()),
      backend_(std::move(backend)),
      node_(std::move(node)),
      name_(std::move(name)),
      hold_(std::move(hold)) {
  if (hold_) end_hold_on_time(backend_, *hold_);
  held_id_ = backend_->held().add(this);
  if (early) {
    backend_->held().adopt(held_id_, *early);
  } else {
    backend_->held().watch(held_id_, node_);
  }
}

zookeeper_lease::~zookeeper_lease() {
  if (released_) return;
  backend_->held().remove(held_id_);
  end_hold_if_over();
  backend_->session().remove(node_, [](zk_reply) {});
}

void zookeeper_lease::end_hold_if_over() {
  if (hold_ && std::chrono::steady_clock::now() >= hold_->until) {
    backend_->session().remove(hold_->node, [](zk_reply) {});
  }
}

void zookeeper_lease::release() {
  released_ = true;
  backend_->held().remove(held_id_);
  end_hold_if_over();
  if (backend_->running_in_this_thread()) {
    // The io thread cannot wait for its own answer; the delete is retried if it is cut off.
    return backend_->session().remove(node_, [](zk_reply) {});
  }
  const std::optional<int> rc =
      backend_->session().remove_and_wait(node_, backend_->settings().release_timeout);
  if (!rc) {
    throw connection_error(backend_->message(
        "no answer to the release within release_timeout (the node goes with the session, or "
        "is deleted after reconnecting)",
        name_));
  }
  if (*rc == ZOK || *rc == ZNONODE || is_session_gone(*rc)) return;
  throw connection_error(backend_->message(
      std::string("release failed: ") + zerror(*rc) +
          (is_connection_loss(*rc) ? " (retried after reconnecting)" : ""),
      name_));
}

}  // namespace dlock::zookeeper::detail
