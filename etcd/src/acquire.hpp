// Private to dlock::etcd: one acquire, as etcd's concurrency.Mutex does it, for every
// primitive (key_layout.hpp says who goes first).
//
// With the provider's lease: reserve a key of the name's queue, create it in one Txn that also
// lists the queue (an uncontended grant is one round trip), then, while something before us
// blocks, watch the nearest blocker's key (a semaphore: the whole queue) for its delete and
// list again. Every step runs on the io thread.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>

#include "client.hpp"
#include "key_layout.hpp"
#include "watcher.hpp"

namespace dlock::etcd::detail {

class etcd_backend;

/// Starts the acquire of `request`; `done` runs once on the io thread.
std::shared_ptr<acquire_operation> start_acquire(std::shared_ptr<etcd_backend> backend,
                                                 acquire_request request,
                                                 acquire_completion done);

/// The state machine behind start_acquire(). Runs on the io thread only; cancel() posts there.
///
///   queueing --withdrawal (cancel)--> withdrawing --no call out--> (key deleted) finished
///   withdrawing --the call out answers--> (key deleted) finished
///   queueing --grant, failure or one-shot miss--> finished
///   queueing --the provider's lease lost--> finished with connection_error
class etcd_acquire final : public acquire_operation,
                           public std::enable_shared_from_this<etcd_acquire> {
 public:
  etcd_acquire(std::shared_ptr<etcd_backend> backend, acquire_request request,
               acquire_completion done);

  void start();
  void cancel() noexcept override;

 private:
  enum class phase { queueing, withdrawing, finished };

  bool withdrawing() const { return phase_ == phase::withdrawing; }

  // The continuation of a call: while a call is out, a stop request waits for it (it may be
  // creating our key); once the op is done, late answers are ignored.
  template <class Response, class Step>
  reply_handler<Response> step(Step next) {
    ++calls_out_;
    return [self = shared_from_this(), next = std::move(next)](grpc::Status status,
                                                               Response response) mutable {
      --self->calls_out_;
      if (self->phase_ == phase::finished) return;
      if (self->withdrawing()) return self->withdraw();
      next(*self, std::move(status), std::move(response));
    };
  }

  void begin();
  void on_lease(std::int64_t lease_id);
  void claim();
  void on_claimed(const pb::TxnResponse& response, bool sent_before);
  void list();
  void judge(std::int64_t revision,
             const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs);
  void wait_for_key(const std::string& key, std::int64_t key_revision, std::int64_t listed_at);
  void on_blocker_event();
  void note_waiting();

  void on_call_failed(const grpc::Status& status, std::string_view call);
  void retry_later();
  void fail(std::exception_ptr error);
  void on_cancel();
  /// Deletes our key (if a claim may have made it), then completes with no lease once etcd
  /// confirms (or the delete gives up).
  void withdraw();
  void grant();
  void finish(std::exception_ptr error, std::unique_ptr<lease> granted);
  void report(std::exception_ptr error, std::unique_ptr<lease> granted);
  void stop_listening();

  std::shared_ptr<etcd_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  boost::asio::any_io_executor executor_;
  boost::asio::steady_timer retry_timer_;
  std::string queue_;
  std::string value_;
  phase phase_ = phase::queueing;
  std::int64_t lease_id_ = 0;
  std::string key_;             // reserved; may exist at etcd once claim_sent_
  bool claim_sent_ = false;     // a claim of key_ went out: the key may exist
  int stale_deletes_ = 0;       // leftover keys of ours deleted before claiming
  bool renewed_lease_ = false;  // one "lease not found" was answered by a new lease
  std::int64_t own_revision_ = 0;
  std::uint64_t watch_ = 0;
  std::uint64_t waits_ = 0;  // waits for a blocker's key begun, to tell a stale check's answer
  std::uint64_t listener_ = 0;
  int calls_out_ = 0;
  bool told_waiting_ = false;
  bool withdrawn_ = false;  // withdraw() ran
};

}  // namespace dlock::etcd::detail
