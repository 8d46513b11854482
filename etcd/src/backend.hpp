// Private to dlock::etcd: the backend behind dlock::etcd::provider.
//
// Start here. client.hpp is the gRPC channel; lease_keeper.hpp the provider's one lease;
// watcher.hpp the one Watch stream; key_layout.hpp where a name's contenders queue and who
// goes first; acquire.hpp one acquire over them; lease.hpp a held key, watched until released.
// Everything but the blocking calls of callers runs on the provider's io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <dlock/core/backend/backend.hpp>
#include <dlock/etcd/options.hpp>

#include "client.hpp"
#include "lease_keeper.hpp"
#include "watcher.hpp"

namespace dlock::etcd::detail {

/// The keys of one name's queues, by kind, each in create-revision order (inspector.cpp).
using queues_by_kind = std::map<resource_kind, std::vector<::mvccpb::KeyValue>>;
/// The time left on each lease asked about (nullopt: gone).
using time_left_by_lease = std::map<std::int64_t, std::optional<std::chrono::nanoseconds>>;

class etcd_backend final : public dlock::backend,
                           public std::enable_shared_from_this<etcd_backend> {
 public:
  /// Validates `opts` and builds the channel. Throws std::invalid_argument naming a bad option.
  explicit etcd_backend(options opts);
  /// Stops the io thread, revokes the lease (waiting up to release_timeout), and lets gRPC
  /// finish every call.
  ~etcd_backend() override;

  std::string_view scheme() const noexcept override { return "etcd"; }
  std::string endpoint() const override { return options_.endpoints; }
  /// Grants the lease, waiting up to connect_timeout. Throws connection_error.
  void start() override;
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;
  /// max_count minus the keys queued now, never negative; std::nullopt on the io thread.
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;
  /// Kept (min_hold.hpp): a released grant's key stays on a lease that etcd expires when the
  /// hold ends, and one that lasts that long from the grant on, so also if its holder dies.
  std::string min_hold_refusal() const override { return {}; }
  /// Not connected while the lease's keepalives go unanswered or a lost lease is not replaced.
  provider_health health() const override;

  /// What the queues show of `name` (inspector.cpp): its keys' owners, create revisions
  /// (tokens) and leases' time left; `since` stays empty (etcd keeps no time per key).
  lock_inspection inspect(const std::string& name) override;
  /// A range read of the prefix, names unescaped.
  std::vector<lock_inspection> list_locks(const std::string& prefix) override;
  /// Deletes the holders' keys; their watches mark them lost, waiters move up.
  void break_lock(const std::string& name) override;

  const options& settings() const noexcept { return options_; }
  /// The board of leader elections (election_board.cpp).
  std::shared_ptr<election_board> elections() override;
  /// The queue of `name` for `kind` (key_layout.hpp) under the options' prefix.
  std::string queue_of(resource_kind kind, std::string_view name) const;

  /// Waits up to `bound` until every handler posted to the io thread before the call has run
  /// (and been destroyed). Returns at once on the io thread. The provider's destructor.
  void settle(std::chrono::nanoseconds bound);

  etcd_client& client() noexcept { return *client_; }
  lease_keeper& keeper() noexcept { return *keeper_; }
  watcher& watches() noexcept { return *watcher_; }

  /// A key of `queue` under `lease_id` that no acquire or grant of this provider uses now
  /// (concurrency.Mutex's key when free); it stays reserved until delete_key() of it answers.
  /// io thread.
  std::string reserve_key(const std::string& queue, std::int64_t lease_id);
  /// Deletes `key` (of lease `lease_id`), then frees its reservation and calls `done` (on
  /// the io thread) with the outcome. A delete that fails transiently is sent again every
  /// delete_retry, after `done`, until it lands or the lease is gone. io thread.
  void delete_key(const std::string& key, std::int64_t lease_id,
                  std::function<void(grpc::Status)> done = {});
  /// Frees the reservation of a key that does not exist at etcd. io thread.
  void unreserve(const std::string& key) { reserved_.erase(key); }

 private:
  static constexpr std::chrono::milliseconds delete_retry{200};
  void delete_later(const std::string& key, std::int64_t lease_id);

  /// Reads the name's lock, reader-writer and semaphore queues (and upgrade gate) in one Txn.
  queues_by_kind read_queues(const std::string& name, bool with_gate);
  lock_inspection inspection_of(const std::string& name, const queues_by_kind& queues,
                                time_left_by_lease& leases);
  /// Throws connection_error "<what> failed: <status>" unless `status` is ok.
  void check(const grpc::Status& status, std::string_view what, std::string_view name) const;

  options options_;
  std::unique_ptr<etcd_client> client_;
  std::shared_ptr<lease_keeper> keeper_;
  std::shared_ptr<watcher> watcher_;
  std::set<std::string> reserved_;  // keys in use by this provider
};

}  // namespace dlock::etcd::detail
