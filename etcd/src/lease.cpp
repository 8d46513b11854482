#include "lease.hpp"

#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::etcd::detail {

held_key::held_key(std::shared_ptr<etcd_backend> backend, std::string key,
                   std::int64_t lease_id, std::int64_t create_revision, min_hold_state hold,
                   std::stop_source lost)
    : backend_(std::move(backend)),
      key_(std::move(key)),
      lease_id_(lease_id),
      create_revision_(create_revision),
      hold_(std::move(hold)),
      lost_(std::move(lost)) {}

void held_key::start() {
  listener_ = backend_->keeper().listen(lease_id_, [self = shared_from_this()](
                                                       std::exception_ptr) { self->lose(); });
  watch_from(create_revision_ + 1);
  if (hold_.lease_id) return_after_hold();
}

// On the hold's own lease, a dead holder's key would stay that lease's whole TTL after its last
// renewal however long ago the grant was; past the hold, the provider's lease does as well. A
// move that fails leaves the key where it is: still correct, and the release sees to it.
void held_key::return_after_hold() {
  hold_timer_ = std::make_shared<boost::asio::steady_timer>(backend_->executor(), hold_.until);
  hold_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->stopped_) return;
    self->backend_->client().txn(
        move_key(self->key_, self->create_revision_, self->hold_.value, self->lease_id_),
        [self](grpc::Status status, pb::TxnResponse response) {
          if (self->stopped_ || !status.ok() || !response.succeeded()) return;
          const std::int64_t hold_lease = std::exchange(self->hold_.lease_id, 0);
          self->backend_->keeper().let_go(hold_lease);
          revoke_later(*self->backend_, hold_lease);
        });
  });
}

void held_key::watch_from(std::int64_t revision) {
  watch_ = backend_->watches().watch(key_, {}, revision,
                                     [self = shared_from_this()](watch_event event) {
                                       self->watch_ = 0;
                                       if (self->stopped_) return;
                                       if (event == watch_event::deleted) return self->lose();
                                       self->recheck();
                                     });
}

// The watch ended without an answer: is the key still the one we were granted?
void held_key::recheck() {
  pb::RangeRequest request;
  request.set_key(key_);
  backend_->client().range(std::move(request), [self = shared_from_this()](
                                                   grpc::Status status, pb::RangeResponse r) {
    if (self->stopped_) return;
    if (!status.ok()) {
      // Unreachable for now: the lease's keepalive decides when that means lost; look again.
      auto timer = std::make_shared<boost::asio::steady_timer>(self->backend_->executor(),
                                                               std::chrono::milliseconds(200));
      timer->async_wait([self, timer](boost::system::error_code) { self->recheck(); });
      return;
    }
    if (r.kvs_size() == 0 || r.kvs(0).create_revision() != self->create_revision_) {
      return self->lose();
    }
    self->watch_from(r.header().revision() + 1);
  });
}

void held_key::lose() {
  if (stopped_) return;
  stop();
  lost_.request_stop();
}

void held_key::stop() {
  stopped_ = true;
  if (hold_timer_) hold_timer_->cancel();
  if (listener_) backend_->keeper().forget(std::exchange(listener_, 0));
  if (watch_) backend_->watches().cancel(std::exchange(watch_, 0));
}

bool held_key::holds_on() const { return std::chrono::steady_clock::now() < hold_.until; }

void held_key::release(std::function<void(bool, std::string)> done) {
  stop();
  // The lease the key is on now: the provider's, or the hold's own it moved to at grant.
  const std::int64_t key_lease = hold_.lease_id ? hold_.lease_id : lease_id_;
  if (holds_on()) {
    return keep_until_hold_ends(backend_, key_, create_revision_, key_lease, hold_,
                                std::move(done));
  }
  if (hold_.lease_id) backend_->keeper().let_go(hold_.lease_id);
  backend_->delete_key(key_, key_lease, [backend = backend_, hold_lease = hold_.lease_id,
                                         done = std::move(done)](grpc::Status status) {
    if (hold_lease) revoke_later(*backend, hold_lease);  // empty now, or its key is to go
    if (done) done(status.ok(), status.ok() ? std::string() : describe(status));
  });
}

etcd_lease::etcd_lease(std::shared_ptr<etcd_backend> backend, std::string key, std::string name,
                       std::int64_t lease_id, std::int64_t create_revision,
                       min_hold_state hold)
    : lease(static_cast<std::uint64_t>(create_revision), backend->keeper().validity_of(lease_id)),
      backend_(std::move(backend)),
      held_(std::make_shared<held_key>(backend_, std::move(key), lease_id, create_revision,
                                       std::move(hold), lost_signal())),
      name_(std::move(name)) {
  held_->start();
}

etcd_lease::~etcd_lease() {
  if (released_) return;
  boost::asio::post(backend_->executor(), [held = held_] { held->release({}); });
}

void etcd_lease::release() {
  released_ = true;
  if (backend_->running_in_this_thread()) return held_->release({});
  // The io thread sends the delete (within a minimum hold: a lease grant, then the move), ends
  // the watch and the key's reservation, and retries a delete that could not reach the cluster;
  // this thread waits for the answer. A delete sent from this thread instead (a blocking call)
  // was measured no faster, so it is not kept (docs/architecture.md, "Routes an acquire
  // and a release take").
  const bool holding = held_->holds_on();
  blocking_reply<std::string> reply;  // what failed; empty when etcd confirmed
  boost::asio::post(backend_->executor(), [held = held_, reply] {
    held->release([reply](bool confirmed, std::string failure) {
      reply.set_value(confirmed ? std::string() : std::move(failure));
    });
  });
  // A lost key goes with its lease: nothing to wait for.
  if (lost()) return;
  const auto failure = reply.get_for(backend_->settings().release_timeout);
  if ((failure && failure->empty()) || lost()) return;
  throw connection_error(backend_->message(
      "release failed: " +
          (failure ? *failure
                   : std::string("no answer within release_timeout (the cluster did not "
                                 "answer, or the provider's thread was busy)")) +
          (holding ? "; the provider moves the key to a lease of the hold's time left when it "
                     "can, or it goes with the lease"
                   : "; the provider deletes the key when it can, or it goes with the lease"),
      name_));
}

}  // namespace dlock::etcd::detail
