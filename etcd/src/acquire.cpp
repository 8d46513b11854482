#include "acquire.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "lease.hpp"

namespace dlock::etcd::detail {

namespace {

// How long a transient failure (a member between leaders, a reconnect) waits before a retry.
// Retries end when the provider's lease is lost: within its TTL.
constexpr auto retry_delay = std::chrono::milliseconds(200);
// Leftover keys of ours (a delete that never landed) deleted before the claim gives up.
constexpr int max_stale_deletes = 3;

pb::RangeRequest queue_listing(const std::string& queue) {
  pb::RangeRequest range;
  range.set_key(queue);
  range.set_range_end(prefix_end(queue));
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_sort_target(pb::RangeRequest::CREATE);
  return range;
}

}  // namespace

etcd_acquire::etcd_acquire(std::shared_ptr<etcd_backend> backend, acquire_request request,
                           acquire_completion done)
    : queue_recipe_operation(backend->executor()),
      retry_timer_(executor_),
      backend_(std::move(backend)),
      request_(std::move(request)),
      done_(std::move(done)),
      queue_(backend_->queue_of(request_.kind, request_.name)),
      value_(contender_value(request_)) {}

void etcd_acquire::queue_key() {
  // A key reserved already (queued again, or a lost answer that may have created it): claim()
  // finds and keeps it.
  if (key_.empty()) return begin();
  claim();
}

void etcd_acquire::begin() {
  backend_->keeper().with_lease(
      step([](etcd_acquire& self, std::exception_ptr error, std::int64_t lease_id) {
        if (error) return self.fail(error);
        self.on_lease(lease_id);
      }));
}

void etcd_acquire::on_lease(std::int64_t lease_id) {
  lease_id_ = lease_id;
  listener_ = backend_->keeper().listen(lease_id, [self = shared_from_this()](
                                                      std::exception_ptr error) {
    self->listener_ = 0;
    if (!self->recipe_.queueing()) return;
    self->error_ = std::move(error);
    self->recipe_.feed(event::connection_lost);
  });
  key_ = backend_->reserve_key(queue_, lease_id);
  claim();
}

// concurrency.Mutex's Txn: create our key unless it exists, and list the queue in the same
// revision, so that an uncontended grant takes one round trip.
void etcd_acquire::claim() {
  pb::TxnRequest txn;
  auto& compare = *txn.add_compare();
  compare.set_key(key_);
  compare.set_target(pb::Compare::CREATE);
  compare.set_result(pb::Compare::EQUAL);
  compare.set_create_revision(0);
  auto& put = *txn.add_success()->mutable_request_put();
  put.set_key(key_);
  put.set_value(value_);
  put.set_lease(lease_id_);
  *txn.add_success()->mutable_request_range() = queue_listing(queue_);
  txn.add_failure()->mutable_request_range()->set_key(key_);
  *txn.add_failure()->mutable_request_range() = queue_listing(queue_);
  const bool sent_before = std::exchange(claim_sent_, true);
  backend_->client().txn(std::move(txn), step([sent_before](etcd_acquire& self,
                                                            grpc::Status status,
                                                            pb::TxnResponse response) {
                           if (!status.ok()) return self.on_call_failed(status, "queueing");
                           self.on_claimed(response, sent_before);
                         }));
}

void etcd_acquire::on_claimed(const pb::TxnResponse& response, bool sent_before) {
  const auto revision = response.header().revision();
  if (response.succeeded()) {
    own_revision_ = revision;
    return judge(revision, response.responses(1).response_range().kvs());
  }
  const auto& existing = response.responses(0).response_range().kvs();
  if (existing.empty()) return claim();  // deleted in between
  if (existing[0].lease() != lease_id_) return claim_another_key();
  if (sent_before) {
    // Our own claim, whose answer was lost: keep our place.
    own_revision_ = existing[0].create_revision();
    return judge(revision, response.responses(1).response_range().kvs());
  }
  // A key of ours left from before (a delete that never landed). Taking it over would hand
  // out its old create revision as a fencing token a second time: delete it, claim anew.
  if (++stale_deletes_ > max_stale_deletes) {
    return fail(std::make_exception_ptr(connection_error(backend_->message(
        "the key " + key_ + " keeps coming back; another client uses this provider's lease",
        request_.name))));
  }
  pb::DeleteRangeRequest remove;
  remove.set_key(key_);
  backend_->client().remove(std::move(remove), step([](etcd_acquire& self, grpc::Status status,
                                                       pb::DeleteRangeResponse) {
                              if (!status.ok()) return self.on_call_failed(status, "cleaning up");
                              self.claim_sent_ = false;
                              self.claim();
                            }));
}

void etcd_acquire::claim_another_key() {
  // Reserved before the old one is given back, so that it is another; taking the old one
  // over or deleting it would end its hold early.
  const std::string old = std::exchange(key_, backend_->reserve_key(queue_, lease_id_));
  backend_->unreserve(old);
  claim_sent_ = false;
  claim();
}

void etcd_acquire::list_queue() {
  backend_->client().range(queue_listing(queue_),
                           step([](etcd_acquire& self, grpc::Status status,
                                   pb::RangeResponse response) {
                             if (!status.ok()) return self.on_call_failed(status, "listing");
                             self.judge(response.header().revision(), response.kvs());
                           }));
}

void etcd_acquire::judge(std::int64_t revision,
                         const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<contender> queue;
  queue.reserve(static_cast<std::size_t>(kvs.size()));
  for (const auto& kv : kvs) queue.push_back({kv.key(), kv.value(), kv.create_revision()});
  verdict next = queue_verdict(request_, key_, queue);
  if (next.other_max_count) {
    return fail(std::make_exception_ptr(backend_->max_count_mismatch(
        request_, *next.other_max_count, "in the values of the keys under " + queue_)));
  }
  switch (next.next) {
    case verdict::action::grant:
      if (request_.min_hold > std::chrono::nanoseconds::zero()) return keep_hold();
      return recipe_.feed(event::first_in_queue);
    case verdict::action::requeue:
      return recipe_.feed(event::own_key_gone);  // our key was deleted behind our back
    case verdict::action::wait_for_key:
    case verdict::action::wait_for_any:
      break;
  }
  blocker_ = std::move(next);
  listed_at_ = revision;
  recipe_.feed(event::someone_in_front);
}

// The provider's lease outlives this process by its TTL from the last keepalive the server
// received. When that already reaches grant + min_hold the key stays where it is; otherwise it
// moves to a lease of the hold's own, of a TTL no shorter than min_hold nor than the
// provider's (so the provider's keepalives, every TTL/3, keep it while the grant is held).
void etcd_acquire::keep_hold() {
  hold_until_ = std::chrono::steady_clock::now() + request_.min_hold;  // no sooner than etcd's
  lease_keeper& keeper = backend_->keeper();
  if (keeper.kept_until() >= hold_until_) return recipe_.feed(event::first_in_queue);
  pb::LeaseGrantRequest grant;
  grant.set_ttl(std::max(seconds_up(request_.min_hold), seconds_up(keeper.ttl())));
  backend_->client().grant(
      std::move(grant), keeper.ttl(),
      step([](etcd_acquire& self, grpc::Status status, pb::LeaseGrantResponse response) {
        if (!status.ok()) return self.on_call_failed(status, "granting a minimum hold's lease");
        if (!response.error().empty()) {
          return self.fail(std::make_exception_ptr(connection_error(self.backend_->message(
              "granting a minimum hold's lease failed: " + response.error(),
              self.request_.name))));
        }
        self.on_hold_lease(response.id());
      }));
}

void etcd_acquire::on_hold_lease(std::int64_t hold_lease) {
  hold_lease_ = hold_lease;
  backend_->client().txn(
      move_key(key_, own_revision_, value_, hold_lease),
      step([](etcd_acquire& self, grpc::Status status, pb::TxnResponse response) {
        if (!status.ok() || !response.succeeded()) {
          // Revoked: whether or not the move landed, the key is then on no lease kept alive.
          revoke_later(*self.backend_, std::exchange(self.hold_lease_, 0));
          if (!status.ok()) return self.on_call_failed(status, "keeping the minimum hold");
          return self.recipe_.feed(event::own_key_gone);  // our key went meanwhile
        }
        self.backend_->keeper().keep_also(self.hold_lease_);
        self.recipe_.feed(event::first_in_queue);
      }));
}

void etcd_acquire::watch_predecessor() {
  note_waiting();
  if (blocker_.next == verdict::action::wait_for_key) {
    return wait_for_key(blocker_.key, blocker_.key_revision, listed_at_);
  }
  // Any delete in the queue may admit a semaphore contender: watch it all from the listing on.
  watch_ = backend_->watches().watch(queue_, prefix_end(queue_), listed_at_ + 1,
                                     [self = shared_from_this()](watch_event) {
                                       self->on_blocker_event();
                                     });
}

// The blocker's key is watched from "now", not from the listing's revision: a watch from a past
// revision is caught up by etcd only every 100 ms, which would slow every handoff under
// contention. What happened between the listing and the watch is then checked with one read.
void etcd_acquire::wait_for_key(const std::string& key, std::int64_t key_revision,
                                std::int64_t listed_at) {
  auto self = shared_from_this();
  const std::uint64_t wait = ++waits_;
  watch_ = backend_->watches().watch(
      key, {}, 0,
      [self](watch_event) { self->on_blocker_event(); },
      [self, key, key_revision, listed_at, wait](std::int64_t watched_from) {
        if (watched_from == listed_at || !self->recipe_.queueing()) return;
        pb::RangeRequest read;
        read.set_key(key);
        self->backend_->client().range(
            std::move(read),
            self->step([key_revision, wait](etcd_acquire& me, grpc::Status status,
                                            pb::RangeResponse response) {
              // Still there, the very key: the watch sees its delete.
              if (!status.ok()) return;
              if (response.kvs_size() > 0 && response.kvs(0).create_revision() == key_revision) {
                return;
              }
              // This wait ended meanwhile (its watch fired): nothing to do.
              if (me.waits_ != wait || me.watch_ == 0) return;
              // Deleted before the watch began: as if the watch saw it.
              me.backend_->watches().cancel(me.watch_);
              me.on_blocker_event();
            }));
      });
}

void etcd_acquire::on_blocker_event() {
  watch_ = 0;
  // Even when the blocker was the only key ahead, the queue is read again before a grant: our
  // own key may be gone too (its lease expired while this process was paused or cut off), and
  // a grant on it would hand out its old create revision after a newer holder's, a fencing
  // token going back. concurrency.Mutex checks its key the same way after its wait.
  recipe_.feed(event::predecessor_gone);
}

void etcd_acquire::note_waiting() {
  if (std::exchange(told_waiting_, true)) return;
  backend_->events().acquire_waiting();
}

void etcd_acquire::on_call_failed(const grpc::Status& status, std::string_view call) {
  if (status.error_code() == grpc::StatusCode::NOT_FOUND &&
      status.error_message().find("lease not found") != std::string::npos &&
      !std::exchange(renewed_lease_, true)) {
    // The lease expired while the keeper still thought it alive: queue again with a new one.
    stop_listening();
    backend_->keeper().lease_gone(lease_id_);
    backend_->unreserve(std::exchange(key_, {}));
    claim_sent_ = false;
    return begin();
  }
  if (is_transient(status)) return retry_later();
  std::string what = std::string(call) + " under " + queue_ + " failed: " + describe(status);
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    what += " (check the user's role: it needs read and write on the prefix)";
  }
  fail(std::make_exception_ptr(connection_error(backend_->message(what, request_.name))));
}

void etcd_acquire::retry_later() {
  retry_timer_.expires_after(retry_delay);
  retry_timer_.async_wait(
      step([](etcd_acquire& self, boost::system::error_code) { self.queue_key(); }));
}

void etcd_acquire::stop_listening() {
  if (listener_) backend_->keeper().forget(std::exchange(listener_, 0));
  if (watch_) backend_->watches().cancel(std::exchange(watch_, 0));
}

void etcd_acquire::drop_hold_lease() {
  if (hold_lease_) revoke_later(*backend_, std::exchange(hold_lease_, 0));
}

void etcd_acquire::fail(std::exception_ptr error) {
  error_ = std::move(error);
  recipe_.feed(event::failed);
}

void etcd_acquire::delete_own_key() {
  stop_listening();
  drop_hold_lease();
  if (key_.empty()) return recipe_.feed(event::key_deleted);
  const std::string key = std::exchange(key_, {});
  if (!claim_sent_) {
    backend_->unreserve(key);
    return recipe_.feed(event::key_deleted);
  }
  backend_->delete_key(key, lease_id_, [self = shared_from_this()](grpc::Status) {
    self->recipe_.feed(event::key_deleted);
  });
}

void etcd_acquire::abandon_own_key() {
  stop_listening();
  drop_hold_lease();
  if (!key_.empty()) {
    if (claim_sent_) {
      backend_->delete_key(key_, lease_id_);
    } else {
      backend_->unreserve(key_);
    }
    key_.clear();
  }
  if (recipe_.done()) end();
}

void etcd_acquire::report(queue_recipe::outcome how) {
  std::unique_ptr<lease> granted;
  if (how == queue_recipe::outcome::granted) {
    granted = std::make_unique<etcd_lease>(
        backend_, std::exchange(key_, {}), request_.name, lease_id_, own_revision_,
        min_hold_state{hold_until_, value_, std::exchange(hold_lease_, 0)});
  }
  if (backend_) stop_listening();
  if (recipe_.done()) end();
  auto done = std::move(done_);
  done(how == queue_recipe::outcome::failed ? error_ : nullptr, std::move(granted));
}

void etcd_acquire::end() {
  if (std::exchange(ended_, true)) return;
  stop_listening();
  retry_timer_.cancel();
  backend_.reset();
}

}  // namespace dlock::etcd::detail
