// Private to dlock::etcd: a grant, the key an acquire queued, watched until released.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/lease.hpp>

#include "min_hold.hpp"

namespace dlock::etcd::detail {

class etcd_backend;

/// What watches a held key on the io thread: lost when the key is deleted or recreated, or
/// the provider's lease is lost. Outlives the etcd_lease while its handlers are pending.
class held_key : public std::enable_shared_from_this<held_key> {
 public:
  held_key(std::shared_ptr<etcd_backend> backend, std::string key, std::int64_t lease_id,
           std::int64_t create_revision, min_hold_state hold, std::stop_source lost);
  /// Starts watching. io thread.
  void start();
  /// Stops watching and deletes the key, or before its minimum hold ends moves it to a lease
  /// of the time left (min_hold.hpp); `done` gets whether etcd confirmed. io thread.
  void release(std::function<void(bool confirmed, std::string failure)> done);
  /// Stops watching (the key stays). io thread.
  void stop();
  const std::string& key() const noexcept { return key_; }
  std::int64_t lease_id() const noexcept { return lease_id_; }
  /// Whether a release now leaves the key in place until its minimum hold ends.
  bool holds_on() const;

 private:
  void watch_from(std::int64_t revision);
  void recheck();
  void lose();
  /// Once the minimum hold is over, moves the key from the hold's own lease back to the
  /// provider's.
  void return_after_hold();

  std::shared_ptr<etcd_backend> backend_;
  std::string key_;
  std::int64_t lease_id_;
  std::int64_t create_revision_;
  min_hold_state hold_;
  std::stop_source lost_;
  std::uint64_t listener_ = 0;
  std::uint64_t watch_ = 0;
  std::shared_ptr<boost::asio::steady_timer> hold_timer_;  // until the hold ends
  bool stopped_ = false;
};

/// A granted key. Its fencing token is the key's create revision.
class etcd_lease final : public dlock::lease {
 public:
  /// Starts watching `key` (call on the io thread).
  etcd_lease(std::shared_ptr<etcd_backend> backend, std::string key, std::string name,
             std::int64_t lease_id, std::int64_t create_revision, min_hold_state hold = {});
  /// Deletes the key without waiting, if release() did not.
  ~etcd_lease() override;

  /// Deletes the key through the io thread (before a minimum hold ends it moves the key
  /// instead) and waits up to release_timeout for the answer. Throws connection_error when it
  /// could not be confirmed (unless the lease was lost already).
  void release() override;

  /// The granted key and the provider's lease it is attached to (an election's proclaim
  /// writes the key again under the same lease).
  const std::string& key() const noexcept { return held_->key(); }
  std::int64_t lease_id() const noexcept { return held_->lease_id(); }

 private:
  std::shared_ptr<etcd_backend> backend_;
  std::shared_ptr<held_key> held_;
  std::string name_;
  bool released_ = false;
};

}  // namespace dlock::etcd::detail
