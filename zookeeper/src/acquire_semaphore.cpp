// The semaphore's leases stage of zookeeper_acquire (acquire.hpp), as Curator's
// InterProcessSemaphoreV2 does it: holding `<node>/locks`, our lease node waits in
// `<node>/leases` until at most max_count leases are there.
#include <string>
#include <utility>

#include "acquire.hpp"
#include "backend.hpp"
#include "node_layout.hpp"
#include "semaphore_count.hpp"

namespace dlock::zookeeper::detail {

void zookeeper_acquire::check_leases() {
  if (!count_checked_) {
    // Pipelined before the listing: the count recorded with the leases, checked once.
    session().get_data(current().parent, step([](zookeeper_acquire& self, zk_reply reply) {
                         self.count_checked_ = true;
                         if (reply.rc != ZOK) return;  // the listing reports the failure
                         self.count_error_ = recorded_count_mismatch(
                             *self.backend_, self.request_, reply.data, self.current().parent);
                       }));
  }
  zk_handler on_change = wake();
  session().get_children(current().parent, step([](zookeeper_acquire& self, zk_reply reply) {
                           self.on_leases(std::move(reply));
                         }),
                         &on_change, &watch_id_);
}

void zookeeper_acquire::on_leases(zk_reply reply) {
  if (reply.rc != ZOK) return on_call_failed(reply.rc, "list");
  if (count_error_) return fail(std::exchange(count_error_, nullptr));
  const std::string own = basename_of(current().node);
  std::size_t leases = 0;
  bool found = false;
  for (const std::string& child : reply.children) {
    if (!is_lease_node(child)) continue;
    ++leases;
    found = found || child == own;
  }
  if (!found) return recipe_.feed(event::own_key_gone);
  if (leases <= request_.max_count) {
    // The lease is ours; the semaphore's lock only serialised the lease creation. Let it go
    // before completing, as Curator does, so that a one-shot attempt that follows ours never
    // finds it still taken.
    return session().remove(std::exchange(stages_[0].node, {}),
                            step([](zookeeper_acquire& self, zk_reply) {
                              self.recipe_.feed(event::first_in_queue);
                            }));
  }
  // Waiting: the children watch set by check_leases wakes us.
  recipe_.feed(event::someone_in_front);
}

}  // namespace dlock::zookeeper::detail
