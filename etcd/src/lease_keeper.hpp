// Private to dlock::etcd: the provider's one etcd lease, kept alive over a LeaseKeepAlive
// stream, and what happens when it is lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/detail/unique_function.hpp>

#include "bidi_stream.hpp"
#include "client.hpp"

namespace dlock::etcd::detail {

class etcd_backend;

/// The lease every key of the provider is attached to.
///
/// Granted by start(), renewed every ttl/3 on one stream. The lease counts as lost, and every
/// listener of it hears so once, when etcd answers a keepalive with TTL 0 (expired), or when no
/// keepalive sent at time t was answered by t + ttl: the server expires the lease no earlier
/// than ttl after it received the last keepalive it answered, so the holders hear first. The
/// next acquire grants a new lease. ~ revokes nothing: revoke() does, on shutdown.
///
/// Thread safety: the io thread only, except start() and revoke() (see there).
class lease_keeper : public std::enable_shared_from_this<lease_keeper> {
 public:
  using lease_handler = dlock::detail::unique_function<void(std::exception_ptr, std::int64_t)>;
  using lost_handler = std::function<void(std::exception_ptr)>;

  lease_keeper(etcd_backend& backend, etcd_client& client);

  /// Grants the first lease, waiting up to connect_timeout. Call from a thread other than the
  /// io thread. Throws connection_error.
  void start();

  /// Calls `done` with the current lease, granting one first if there is none (then on a later
  /// turn of the io thread); with connection_error if that fails.
  void with_lease(lease_handler done);

  /// Calls `on_lost` once if lease `lease_id` is lost (never after forget(id)).
  std::uint64_t listen(std::int64_t lease_id, lost_handler on_lost);
  void forget(std::uint64_t listener);

  /// Whether `lease_id` is the lease kept now. io thread.
  bool keeps(std::int64_t lease_id) const { return lease_ == lease_id; }

  /// Lease `lease_id` is gone by etcd's word (a put refused with "lease not found").
  void lease_gone(std::int64_t lease_id);

  /// Until when, by this process's steady clock, the server keeps the current lease at least
  /// (the send time of the last answered keepalive, plus the TTL); time_point::min() without
  /// a lease. io thread.
  std::chrono::steady_clock::time_point kept_until() const;
  std::chrono::nanoseconds ttl() const noexcept { return ttl_; }
  /// The validity of lease `lease_id`, which its keepalives' answers move on (kept_until());
  /// one that has passed already when it is not the lease kept now (it was lost). io thread.
  std::shared_ptr<const grant_validity> validity_of(std::int64_t lease_id) const;

  /// Keeps lease `hold_id` (a minimum hold's, of a TTL no shorter than this one's) alive with
  /// the provider's lease, on the same stream and cadence, until let_go(hold_id) or the
  /// provider's lease is lost: then it runs out on its own. io thread.
  void keep_also(std::int64_t hold_id) { holds_.insert(hold_id); }
  void let_go(std::int64_t hold_id) { holds_.erase(hold_id); }

  /// Stops the keepalives and revokes the lease, waiting up to `timeout` (a blocking gRPC
  /// call). Call once the io thread has stopped.
  void revoke(std::chrono::nanoseconds timeout);

  /// What provider::health() reports, empty while the lease is kept: its keepalives going
  /// unanswered, or a lost lease not replaced yet. Any thread.
  std::optional<std::string> trouble() const;

 private:
  using stream = bidi_stream<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>;
  struct listener {
    std::int64_t lease_id;
    lost_handler on_lost;
  };

  void grant();
  void on_granted(grpc::Status status, const pb::LeaseGrantResponse& response);
  void tick();
  void send_keepalive();
  void on_keepalive(const pb::LeaseKeepAliveResponse& response);
  void lose(std::int64_t lease_id, const std::string& why);
  void regrant_later();
  void set_answered(std::chrono::steady_clock::time_point sent);

  etcd_backend& backend_;
  etcd_client& client_;
  std::chrono::nanoseconds ttl_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer reopen_timer_;  // a keepalive soon after a stream broke
  std::optional<std::int64_t> lease_;
  bool granting_ = false;
  std::chrono::steady_clock::time_point grant_sent_;  // when the last grant went out
  std::vector<lease_handler> waiting_;
  std::shared_ptr<stream> stream_;
  std::deque<std::chrono::steady_clock::time_point> unanswered_;  // send times, oldest first
  std::chrono::steady_clock::time_point answered_sent_;  // send time of the last answered one
  std::shared_ptr<grant_validity> validity_;  // kept_until(), for the leases of its keys
  std::map<std::uint64_t, listener> listeners_;
  std::set<std::int64_t> holds_;  // minimum holds' leases kept alive with ours (keep_also)
  std::uint64_t next_listener_ = 1;

  // For trouble(), from any thread.
  mutable std::mutex trouble_mutex_;
  std::optional<std::chrono::steady_clock::time_point> kept_answered_;  // empty: no lease
  std::string lost_why_;  // why the last lease was lost, until a new one is granted
};

}  // namespace dlock::etcd::detail
