#include "min_hold.hpp"

#include <utility>

#include <boost/asio/steady_timer.hpp>

#include "backend.hpp"

namespace dlock::etcd::detail {

namespace {

// How soon a move that failed transiently (a member between leaders) is made again.
constexpr auto move_retry_delay = std::chrono::milliseconds(200);

/// One release's move of its key to a lease of the hold's time left, retried until it lands.
/// Weak: a retry must not keep the backend alive past its provider.
class hold_move : public std::enable_shared_from_this<hold_move> {
 public:
  hold_move(std::weak_ptr<etcd_backend> backend, std::string key, std::int64_t create_revision,
            std::int64_t key_lease, min_hold_state hold,
            std::function<void(bool, std::string)> done)
      : backend_(std::move(backend)),
        key_(std::move(key)),
        create_revision_(create_revision),
        key_lease_(key_lease),
        hold_(std::move(hold)),
        done_(std::move(done)) {}

  void run() {
    auto backend = backend_.lock();
    if (!backend) return;
    const auto left = hold_.until - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      // The hold ended meanwhile (retries took that long): an ordinary release.
      return backend->delete_key(key_, key_lease_, [self = shared_from_this()](grpc::Status s) {
        if (auto b = self->backend_.lock(); b && self->hold_.lease_id) {
          revoke_later(*b, self->hold_.lease_id);
        }
        self->finish(s.ok(), s.ok() ? std::string() : describe(s));
      });
    }
    pb::LeaseGrantRequest grant;
    grant.set_ttl(seconds_up(left));
    backend->client().grant(
        std::move(grant), backend->settings().release_timeout,
        [self = shared_from_this()](grpc::Status status, pb::LeaseGrantResponse response) {
          if (!status.ok()) return self->retry(describe(status));
          if (!response.error().empty()) return self->retry(response.error());
          self->move_to(response.id());
        });
  }

 private:
  void move_to(std::int64_t lease_id) {
    auto backend = backend_.lock();
    if (!backend) return;
    backend->client().txn(
        move_key(key_, create_revision_, hold_.value, lease_id),
        [self = shared_from_this(), lease_id](grpc::Status status, pb::TxnResponse response) {
          auto b = self->backend_.lock();
          if (!b) return;
          if (!status.ok()) {
            revoke_later(*b, lease_id);
            return self->retry(describe(status));
          }
          // Moved, or no longer ours (deleted, expired): either way nothing is left on the
          // hold's own lease, and a key that is not ours any more is not touched.
          if (!response.succeeded()) revoke_later(*b, lease_id);
          if (self->hold_.lease_id) revoke_later(*b, self->hold_.lease_id);
          self->finish(true, {});
        });
  }

  void finish(bool confirmed, std::string failure) {
    // The key's name may still be at etcd until the hold ends: an acquire of this provider
    // that finds it there queues under another name (acquire.cpp).
    if (auto backend = backend_.lock()) backend->unreserve(key_);
    tell(confirmed, std::move(failure));
  }

  void tell(bool confirmed, std::string failure) {
    if (auto done = std::exchange(done_, nullptr)) done(confirmed, std::move(failure));
  }

  void retry(std::string failure) {
    tell(false, std::move(failure));
    auto backend = backend_.lock();
    if (!backend) return;
    // On a hold's own lease, let go of, the key goes when that lease runs out: no sooner than
    // the hold's end. On the provider's lease it would stay as long as the provider lives.
    if (!backend->keeper().keeps(key_lease_)) return backend->unreserve(key_);
    auto timer =
        std::make_shared<boost::asio::steady_timer>(backend->executor(), move_retry_delay);
    timer->async_wait([self = shared_from_this(), timer](boost::system::error_code ec) {
      if (!ec) self->run();
    });
  }

  std::weak_ptr<etcd_backend> backend_;
  std::string key_;
  std::int64_t create_revision_;
  std::int64_t key_lease_;
  min_hold_state hold_;
  std::function<void(bool, std::string)> done_;
};

}  // namespace

std::int64_t seconds_up(std::chrono::nanoseconds d) {
  return std::chrono::ceil<std::chrono::seconds>(d).count();
}

pb::TxnRequest move_key(const std::string& key, std::int64_t create_revision,
                        const std::string& value, std::int64_t lease_id) {
  pb::TxnRequest txn;
  auto& compare = *txn.add_compare();
  compare.set_key(key);
  compare.set_target(pb::Compare::CREATE);
  compare.set_result(pb::Compare::EQUAL);
  compare.set_create_revision(create_revision);
  auto& put = *txn.add_success()->mutable_request_put();
  put.set_key(key);
  put.set_value(value);
  put.set_lease(lease_id);
  return txn;
}

void keep_until_hold_ends(std::shared_ptr<etcd_backend> backend, std::string key,
                          std::int64_t create_revision, std::int64_t key_lease,
                          min_hold_state hold, std::function<void(bool, std::string)> done) {
  // The hold's own lease is renewed no more: whatever happens below, it runs out in time.
  if (hold.lease_id) backend->keeper().let_go(hold.lease_id);
  std::make_shared<hold_move>(backend, std::move(key), create_revision, key_lease,
                              std::move(hold), std::move(done))
      ->run();
}

void revoke_later(etcd_backend& backend, std::int64_t lease_id) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  backend.client().revoke(std::move(request), backend.settings().release_timeout,
                          [](grpc::Status, pb::LeaseRevokeResponse) {});
}

}  // namespace dlock::etcd::detail
