// Private to dlock::etcd: one acquire, as etcd's concurrency.Mutex does it, for every
// primitive (key_layout.hpp says who goes first).
//
// With the provider's lease: reserve a key of the name's queue, create it in one Txn that also
// lists the queue (an uncontended grant is one round trip), then, while something before us
// blocks, watch the nearest blocker's key (a semaphore: the whole queue) for its delete and
// list again. Every step runs on the io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/queue_recipe_operation.hpp>

#include "backend.hpp"
#include "client.hpp"
#include "key_layout.hpp"
#include "min_hold.hpp"
#include "watcher.hpp"

namespace dlock::etcd::detail {

/// etcd's side of a queue_recipe (dlock/core/backend/queue_recipe.hpp), which says when to
/// queue, list, watch, withdraw and report. Runs on the io thread only.
class etcd_acquire final : public queue_recipe_operation<etcd_acquire> {
 public:
  etcd_acquire(std::shared_ptr<etcd_backend> backend, acquire_request request,
               acquire_completion done);

 private:
  /// Gets the provider's lease, then claims a key with it.
  void begin();
  void queue_key() override;
  void on_lease(std::int64_t lease_id);
  void claim();
  void on_claimed(const pb::TxnResponse& response, bool sent_before);
  void list_queue() override;
  void judge(std::int64_t revision,
             const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs);
  /// Admitted with a minimum hold: makes sure the key lasts until grant + min_hold even if
  /// this process dies now, then feeds first_in_queue (min_hold.hpp).
  void keep_hold();
  void on_hold_lease(std::int64_t hold_lease);
  /// Another key of this provider's name is in the way (a released grant's, kept until its
  /// minimum hold ends): queues under a name of its own instead.
  void claim_another_key();
  /// Revokes the hold's own lease of a withdrawn or failed acquire (its key goes anyway).
  void drop_hold_lease();
  void watch_predecessor() override;
  void wait_for_key(const std::string& key, std::int64_t key_revision, std::int64_t listed_at);
  void on_blocker_event();
  void note_waiting();

  void on_call_failed(const grpc::Status& status, std::string_view call);
  void retry_later();
  void fail(std::exception_ptr error);
  void stop_listening();

  /// Deletes our key (if a claim may have made it), then feeds key_deleted once etcd answers.
  void delete_own_key() override;
  void abandon_own_key() override;
  /// The lease of a grant carries our key on; a failure stops listening at once, even while
  /// the recipe still abandons.
  void report(queue_recipe::outcome how) override;
  /// Lets go of the lease listener, the watch, the timer and the backend, once the recipe is
  /// done: as in core, the caller, not this op, holds the last reference to the backend.
  void end();

  boost::asio::steady_timer retry_timer_;
  std::shared_ptr<etcd_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  std::string queue_;
  std::string value_;
  std::int64_t lease_id_ = 0;
  std::string key_;             // reserved; may exist at etcd once claim_sent_
  bool claim_sent_ = false;     // a claim of key_ went out: the key may exist
  int stale_deletes_ = 0;       // leftover keys of ours deleted before claiming
  bool renewed_lease_ = false;  // one "lease not found" was answered by a new lease
  std::int64_t own_revision_ = 0;
  std::chrono::steady_clock::time_point hold_until_ =  // grant + min_hold, once admitted
      std::chrono::steady_clock::time_point::min();
  std::int64_t hold_lease_ = 0;  // the hold's own lease, once the key moved to it
  verdict blocker_;             // who keeps us waiting, from the last listing
  std::int64_t listed_at_ = 0;  // ... and the revision of that listing
  std::uint64_t watch_ = 0;
  std::uint64_t waits_ = 0;  // waits for a blocker's key begun, to tell a stale check's answer
  std::uint64_t listener_ = 0;
  std::exception_ptr error_;  // what report_failed reports
  bool told_waiting_ = false;
  bool ended_ = false;
};

}  // namespace dlock::etcd::detail
