// Private to dlock::zookeeper: one acquire, as Curator's recipes do it.
//
// A lock or reader-writer lock queues one node under the lock node (node_layout.hpp). A
// semaphore first takes the exclusive lock `<node>/locks`, then adds its lease under
// `<node>/leases` and waits until at most max_count leases are there, then lets
// `<node>/locks` go (InterProcessSemaphoreV2). Every step runs on the io thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/queue_recipe_operation.hpp>

#include "completion_routes.hpp"
#include "held_watch.hpp"
#include "session.hpp"

namespace dlock::zookeeper::detail {

class zookeeper_backend;

/// ZooKeeper's side of a queue_recipe (dlock/core/backend/queue_recipe.hpp), which says when to
/// queue, list, watch, withdraw and report. What stays here is ZooKeeper's own: a node found
/// again after a create's answer was lost, the parents made on demand, a semaphore's two
/// stages, and the creates of unknown outcome handed to the session when the acquire ends.
/// Runs on the io thread only.
class zookeeper_acquire final : public queue_recipe_operation<zookeeper_acquire> {
 public:
  zookeeper_acquire(std::shared_ptr<zookeeper_backend> backend, acquire_request request,
                    acquire_completion done);

 private:
  struct stage {
    std::string parent;
    std::string_view marker;
    std::string prefix;  // the protection prefix of the current create
    std::string node;    // our node, once created
    bool create_unknown = false;  // a create of `prefix` is out, or its answer was lost
    std::int64_t czxid = 0;
  };

  /// The backend's session: where every call of the recipe goes.
  zk_session& session();
  stage& current() { return stages_[stage_index_]; }
  /// The data of our nodes: the owner (what Curator's data, the host's address, stands for),
  /// read by the inspector.
  std::string node_data() const;
  bool leases_stage() const {
    return request_.kind == resource_kind::semaphore && stage_index_ == 1;
  }

  /// Waits for the session's connection; a failure to connect ends the acquire.
  template <class Step>
  void when_connected(Step next) {
    recipe_.call_sent();
    session().when_connected([self = shared_from_this(), next](std::exception_ptr error) mutable {
      if (!error) {
        if (self->recipe_.call_answered()) next(*self);
        return;
      }
      if (!self->recipe_.done()) self->error_ = std::move(error);
      self->recipe_.feed(event::call_failed);
    });
  }
  // The handler of a watch: what wakes a waiting op.
  zk_handler wake();

  // Queueing: create our node (found again after a lost answer), then find our place.
  void queue_key() override;
  void create_own();
  void send_create();
  void note_created(const zk_reply& reply);
  void on_created(zk_reply reply);
  void find_own();
  /// The listing sent right behind a create. Its answer is handled right after the create's
  /// (joined_answers), in the same turn of the io thread.
  void on_pipelined_listing(std::uint64_t attempt, zk_reply reply);
  void after_create();
  void list_queue() override;
  void check_queue();
  void on_queue(zk_reply reply);
  void at_head_of_queue();

  // A minimum hold (min_hold.hpp).
  /// Whether this acquire waits for other grants' holds: a lock's, or a reader-writer lock's
  /// on the same node.
  bool respects_holds() const;
  bool takes_hold() const { return request_.min_hold > std::chrono::nanoseconds::zero(); }
  /// Creates our grant's hold node, then reports the grant.
  void record_hold();
  void on_hold_recorded(const zk_reply& reply);
  /// Deletes the hold node of a grant not reported (withdrawn, failed, queued again).
  void drop_hold_node();

  // A semaphore's leases stage.
  void check_leases();
  void on_leases(zk_reply reply);

  // Waiting.
  void watch_predecessor() override;
  /// Waits for the predecessor `path` to go (or change).
  void watch(const std::string& path);
  void on_watch_event(const zk_reply& event);
  void drop_watch();
  /// Watches our own node while we wait, for the lease to adopt (held_watch.hpp): a lock's
  /// or reader-writer lock's only, whose node's data never changes.
  void watch_own_node();
  void drop_own_watch();
  void note_waiting();

  // Failures.
  /// The session has been out of touch for too long: no wait outlives an outage.
  void on_unreachable(std::exception_ptr error);
  /// Hands a create of unknown outcome to the session, which deletes its node if there is one.
  void forget_unknown_create(stage& s);
  void on_call_failed(int rc, std::string_view call);
  // ensure_path creates every node from the top down, below the chroot: only a missing chroot
  // (which ZooKeeper does not let a chrooted client create) leaves a parent it cannot make.
  void fail_missing_chroot();
  void fail(std::exception_ptr error);

  // Ending.
  /// Deletes our nodes, then feeds key_deleted once the server confirms, so that a caller who
  /// lists the queue next finds them gone (a delete cut off by the connection completes as
  /// cut off and is retried after reconnecting; a session expiry removes the nodes anyway).
  void delete_own_key() override;
  void abandon_own_key() override;
  /// Completes the acquire for the caller (once); clean-up may still go on after it. A grant's
  /// lease takes over the watch of our node.
  void report(queue_recipe::outcome how) override;
  /// Lets go of the watches, the session's word and the backend once the recipe is done, and
  /// hands creates of unknown outcome to the session: as in core, the caller, not this op,
  /// holds the last reference to the backend.
  void end();

  std::shared_ptr<zookeeper_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  std::vector<stage> stages_;
  std::size_t stage_index_ = 0;
  std::uint64_t watch_id_ = 0;
  std::shared_ptr<held_watch::early_watch> own_watch_;  // the watch watch_own_node() set
  std::uint64_t watch_serial_ = 0;  // the watch() whose answer still counts (drop_watch ends it)
  std::uint64_t unreachable_id_ = 0;  // our registration with session().when_unreachable()
  std::string hold_node_;  // our hold node, from its create until the grant is reported
  std::chrono::steady_clock::time_point hold_until_;  // the hold's end (min_hold_grant::until)
  std::string predecessor_;             // the node in front, from the last listing
  bool last_blocker_ = false;           // ... and all that is in our way
  bool watched_last_blocker_ = false;  // the predecessor watched is all that is in our way
  bool count_checked_ = false;          // a semaphore's recorded max_count was looked at
  std::exception_ptr count_error_;      // ... and differs from ours
  std::uint64_t attempt_ = 0;            // creates sent so far
  std::uint64_t pipelined_listing_ = 0;  // the attempt whose pipelined listing is still out
  bool told_waiting_ = false;  // events().acquire_waiting() was called (once per acquire)
  std::exception_ptr error_;   // what report_failed reports
  bool ended_ = false;
};

}  // namespace dlock::zookeeper::detail
