// Private to dlock::redis: the backend behind dlock::redis::provider. Start here; the rest of
// redis/src is one idea per file:
//
//   acquire          a waiting acquire (try, subscribe, try again, wait for a release)
//   lease            a grant, owned by the handle
//   watchdog         extends every held lease, marks the lost ones
//   redlock          the servers as one voting body: fan-out, quorum, give-back, validity
//   keys, scripts    where a name lives, and the Lua that makes each step atomic (eval: how
//                    a script is sent); acquire_answer reads the acquire script's reply
//   node             one server: command and subscriber connections, blocking pool
//   cluster_router   a Redis Cluster as one server: each command to its slot's master
//                    (cluster_slots: hash slots, the slot map, MOVED and ASK read)
//   connection, sync_connections, log_in, reply   RESP over a transport (hiredis formats and
//                    parses); transport: TCP, TLS (tls_client), Unix sockets
//
// Threads: asynchronous Redis traffic runs on the backend's network thread (connections are
// not thread-safe): waiting acquires, the watchdog, RedLock fan-outs, releases from the
// network thread. On one server, a blocking acquire's first attempt and a release run on the
// caller's thread over a pool of blocking connections instead. The provider's executor (core's
// timers, completion handlers) is a second thread, io(), so a handler that blocks it delays no
// extension and no release.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/io_thread.hpp>
#include <dlock/redis/options.hpp>

#include "keys.hpp"
#include "redlock.hpp"
#include "sentinel_follower.hpp"
#include "watchdog.hpp"

namespace dlock::redis::detail {

class redis_backend final : public dlock::backend,
                            public inline_acquirer,
                            public std::enable_shared_from_this<redis_backend> {
 public:
  /// Throws std::invalid_argument for an invalid option.
  explicit redis_backend(options opts);
  ~redis_backend() override;

  std::string_view scheme() const noexcept override { return "redis"; }
  std::string endpoint() const override { return nodes_->endpoint(); }
  /// Acquires complete on the network thread, so core's steps run there too: a grant reaches
  /// a blocked caller with one wake-up (the caller's), not two (core's thread, then the
  /// caller's); an async acquire's attempt starts there without a stop on core's thread.
  boost::asio::any_io_executor acquire_executor() const override { return network_executor(); }
  bool running_in_this_thread() const noexcept override {
    return dlock::backend::running_in_this_thread() || network_->running_in_this_thread();
  }
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;
  /// Overdue: held leases the watchdog has not had confirmed in time (health.hpp).
  provider_health health() const override;
  /// On one server, a blocking acquire makes its first attempt on the caller's thread (not
  /// with Sentinel: the network thread's connections are the ones that follow a failover; not
  /// in a cluster: commands are routed by slot on the network thread).
  inline_acquirer* as_inline_acquirer() noexcept override {
    return on_callers_thread() ? this : nullptr;
  }
  /// A round trip: an async acquire does not make it on the initiating thread.
  bool acquires_inline_locally() const noexcept override { return false; }
  /// Empty (kept: scripts.cpp, hold_function) but with plain keys or .NET's layout.
  std::string min_hold_refusal() const override;
  /// On a Cluster in .NET's layout, a name whose keys would span hash slots.
  void check_name(resource_kind kind, std::string_view name) const override;
  std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) override;
  /// Any deployment (RedLock's by majority), in either key mode (keys.hpp).
  std::shared_ptr<election_board> elections() override;
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;
  // inspector.cpp: the grants and owners every node shows; a break deletes them all.
  lock_inspection inspect(const std::string& name) override;
  /// inspect()'s holders, by majority with RedLock; plain keys and .NET's layout keep no token
  /// with a grant (std::invalid_argument).
  bool is_current(const acquire_request& request, std::uint64_t fencing_token) override;
  /// SCANs every node (a Cluster: every master) for the names' fencing counters, then
  /// inspects each.
  std::vector<lock_inspection> list_locks(const std::string& prefix) override;
  void break_lock(const std::string& name) override;

  boost::asio::any_io_executor network_executor() const { return network_->executor(); }
  const options& settings() const noexcept { return options_; }
  node_set& nodes() noexcept { return *nodes_; }

  /// The keys of `request.name` for a request of this kind and mode.
  key_set keys_for(const acquire_request& request) const {
    return keys_.keys_for(request, *this);
  }
  std::string lock_key(std::string_view name) const { return keys_.lock_key(name); }
  /// The error for a WRONGTYPE answer to `request`'s acquire (acquire_answer::wrong_type).
  std::invalid_argument key_clash(const acquire_request& request, const key_set& keys,
                                  const std::string& reply) const;

  /// Makes the lease of a new grant and puts it under the watchdog. Any thread.
  std::unique_ptr<lease> grant(const std::string& name, const key_set& keys,
                               const std::string& token,
                               std::chrono::steady_clock::time_point valid_until,
                               std::uint64_t fencing_token);
  /// Releases `grant`: stops extending it first, then deletes it on every node. Waits (at most
  /// release_timeout for the network thread) unless called on the network thread or `wait` is
  /// false.
  /// Throws connection_error (when waiting) if no majority of nodes confirmed.
  void release(const std::shared_ptr<held_grant>& grant, bool wait);

  /// With Sentinel, the key of the master's failover epoch, from which the acquire script
  /// raises fencing counters (sentinel_master::epoch_key); empty otherwise.
  std::string epoch_key() const;

 private:
  options options_;
  key_scheme keys_;
  /// All Redis traffic, the watchdog included.
  std::unique_ptr<io_thread> network_;
  std::shared_ptr<node_set> nodes_;
  watchdog watchdog_;
  /// With Sentinel: hears failovers, started by the first acquire.
  std::unique_ptr<sentinel_follower> follower_;
  std::atomic<bool> following_{false};

  bool on_callers_thread() const noexcept {
    return nodes_->size() == 1 && !nodes_->sentinel() && !nodes_->routed_by_slot();
  }
  void follow_sentinel();
  // inspector.cpp: the nodes list_locks SCANs, and how many of them must answer.
  std::pair<std::vector<node*>, std::size_t> scanned_nodes(const std::string& prefix);
  /// Throws unsupported_operation naming `operation` in .NET's key layout.
  void refuse_in_dotnet_layout(std::string_view operation) const;
};

}  // namespace dlock::redis::detail
