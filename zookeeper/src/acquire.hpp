// Private to dlock::zookeeper: one acquire, as Curator's recipes do it.
//
// A lock or reader-writer lock queues one node under the lock node (node_layout.hpp). A
// semaphore first takes the exclusive lock `<node>/locks`, then adds its lease under
// `<node>/leases` and waits until at most max_count leases are there, then lets
// `<node>/locks` go (InterProcessSemaphoreV2). Every step runs on the io thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>

#include "completion_routes.hpp"
#include "held_watch.hpp"
#include "session.hpp"

namespace dlock::zookeeper::detail {

class zookeeper_backend;

/// Starts the acquire of `request`; `done` runs once on the io thread.
std::shared_ptr<acquire_operation> start_acquire(std::shared_ptr<zookeeper_backend> backend,
                                                 acquire_request request,
                                                 acquire_completion done);

/// The state machine behind start_acquire(). Runs on the io thread only; cancel() posts
/// there.
///
///   queueing --stop request--> withdrawing --no call out--> (nodes deleted) finished
///   withdrawing --the call out answers--> (nodes deleted) finished
///   queueing --grant, failure or one-shot miss--> finished
///   queueing --the session unreachable--> finished with connection_error (our nodes are
///       deleted once reconnected), or answered with it while a call is still out
class zookeeper_acquire final : public acquire_operation,
                                public std::enable_shared_from_this<zookeeper_acquire> {
 public:
  zookeeper_acquire(std::shared_ptr<zookeeper_backend> backend, acquire_request request,
                    acquire_completion done);

  void start();
  void cancel() noexcept override;

 private:
  enum class phase {
    queueing,     ///< working towards a grant
    withdrawing,  ///< a stop request came: remove our nodes once no call is out, then complete
    answered,     ///< withdrawing, and the caller was told "not acquired" already
    finished,     ///< completed; late answers are ignored
  };

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
  bool leases_stage() const { return request_.kind == primitive::semaphore && stage_index_ == 1; }
  bool withdrawing() const { return phase_ == phase::withdrawing || phase_ == phase::answered; }

  // The continuation of a call: while calls are out, a stop request waits for them (one may
  // be creating our node), and once the op is done their late answers are ignored.
  template <class Step>
  auto step(Step next) {
    ++calls_out_;
    return [self = shared_from_this(), next = std::move(next)](auto&&... args) mutable {
      --self->calls_out_;
      if (self->phase_ == phase::finished) return;
      next(*self, std::forward<decltype(args)>(args)...);
    };
  }
  // The handler of a watch: what wakes a waiting op.
  zk_handler wake();

  // Queueing: create our node (found again after a lost answer), then find our place.
  void begin();
  void create_own();
  void send_create();
  void on_created(zk_reply reply);
  void find_own();
  /// The listing sent right behind a create. Its answer is handled right after the create's
  /// (joined_answers), in the same turn of the io thread.
  void on_pipelined_listing(std::uint64_t attempt, zk_reply reply);
  void after_create();
  void check_queue();
  void on_queue(zk_reply reply);
  void at_head_of_queue();

  // A semaphore's leases stage.
  void check_leases();
  void on_leases(zk_reply reply);

  // Waiting.
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
  void on_cancel();
  /// Deletes our nodes, then completes with no lease once the server confirms, so that a
  /// caller who lists the queue next finds them gone (a delete cut off by the connection
  /// completes as cut off and is retried after reconnecting; a session expiry removes the
  /// nodes anyway).
  void abandon();
  void grant();
  void finish(std::exception_ptr error, std::unique_ptr<lease> granted);
  /// Completes the acquire for the caller (once); cleanup may still go on after it.
  void report(std::exception_ptr error, std::unique_ptr<lease> granted);

  std::shared_ptr<zookeeper_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  boost::asio::any_io_executor executor_;
  phase phase_ = phase::queueing;
  std::vector<stage> stages_;
  std::size_t stage_index_ = 0;
  std::uint64_t watch_id_ = 0;
  std::shared_ptr<held_watch::early_watch> own_watch_;  // the watch watch_own_node() set
  std::uint64_t watch_serial_ = 0;  // the watch() whose answer still counts (drop_watch ends it)
  std::uint64_t unreachable_id_ = 0;  // our registration with session().when_unreachable()
  int calls_out_ = 0;
  bool watched_last_blocker_ = false;  // the predecessor watched is all that is in our way
  bool count_checked_ = false;          // a semaphore's recorded max_count was looked at
  std::exception_ptr count_error_;      // ... and differs from ours
  std::uint64_t attempt_ = 0;            // creates sent so far
  std::uint64_t pipelined_listing_ = 0;  // the attempt whose pipelined listing is still out
  bool told_waiting_ = false;  // events().acquire_waiting() was called (once per acquire)
};

}  // namespace dlock::zookeeper::detail
