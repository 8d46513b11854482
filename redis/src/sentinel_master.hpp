// Private to dlock::redis: the master of a Sentinel deployment as the provider knows it: the
// sentinels to ask, where they last said the master is, and the failover epoch that keeps
// fencing tokens rising across failovers. sentinel_transport asks the sentinels on every new
// connection; sentinel_follower hears their +switch-master announcements.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <dlock/redis/options.hpp>

#include "log_in.hpp"
#include "reply.hpp"

namespace dlock::redis::detail {

class connection;

/// Where a sentinel says the master is, and the master's configuration epoch (Sentinel's
/// failover epoch: every failover raises it).
struct master_address {
  std::string host;
  std::uint16_t port = 0;
  std::uint64_t epoch = 0;
};

/// How many bits of a fencing token count grants within one failover epoch: a grant after a
/// failover to epoch e gets a token above e << epoch_shift, so above every token issued before
/// it, even when the new master's counter missed the last ones (asynchronous replication).
inline constexpr unsigned epoch_shift = 32;

/// The master of one Sentinel deployment. Thread safety: every member, any thread.
class sentinel_master {
 public:
  /// Requires: `opts` validated, with a master name.
  sentinel_master(const options& opts, std::shared_ptr<tls_client> tls);

  const std::string& name() const noexcept { return name_; }
  /// "sentinel 127.0.0.1:26379,127.0.0.1:26380/mymaster", for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }
  std::size_t sentinel_count() const noexcept { return sentinels_.size(); }
  /// The n-th sentinel to ask: the one that answered last comes first.
  std::size_t sentinel_index(std::size_t n) const;
  const server_settings& sentinel(std::size_t index) const { return sentinels_[index]; }
  /// How a connection to the master at `at` is made: the data node's settings, that address.
  server_settings master_settings(const master_address& at) const;

  /// Records what sentinel `index` said; runs the change handler when the master moved.
  void learned(std::size_t index, const master_address& at);
  /// Records a +switch-master announcement (no epoch: the next question to a sentinel gets it).
  void switched(const std::string& host, std::uint16_t port);

  /// The key on the master that holds the highest failover epoch a connection to it was
  /// made in: `<key_prefix>sentinel-epoch`. The acquire script raises a fencing counter to
  /// that epoch << epoch_shift before it counts (scripts.cpp).
  const std::string& epoch_key() const noexcept { return epoch_key_; }
  /// The last log-in step of a connection to the master: raises epoch_key() there to the
  /// highest epoch heard (at least the epoch of the master the connection reached), so every
  /// command sent on the connection counts from above the tokens of earlier masters.
  log_in_step raise_epoch_step() const;

  /// Runs `on_change` (on the thread that learned it, outside any lock) each time the master
  /// is found somewhere else than before; `announced` when a +switch-master said so (then
  /// connections made before may still reach the old master). Set once, before the first
  /// connection.
  using change_handler = std::function<void(const std::string& why, bool announced)>;
  void on_change(change_handler on_change) {
    on_change_ = std::move(on_change);
  }

 private:
  void moved_to(const std::string& host, std::uint16_t port, const std::string& how,
                bool announced);

  std::string name_;
  std::string endpoint_;
  std::string epoch_key_;
  std::vector<server_settings> sentinels_;
  server_settings data_node_;
  change_handler on_change_;
  mutable std::mutex mutex_;
  std::size_t preferred_ = 0;
  std::optional<master_address> known_;
  std::uint64_t highest_epoch_ = 0;
};

/// What a sentinel answered: where the master is, or why it did not say.
using master_answer = dlock::detail::unique_function<void(std::optional<master_address> at,
                                                          const std::string& why)>;

/// Asks the sentinel at the other end of `link` where master `name` is: SENTINEL
/// GET-MASTER-ADDR-BY-NAME (during a failover, the replica being promoted) and, on the same
/// connection, SENTINEL MASTER for its configuration epoch. When the two addresses differ (a
/// failover under way), the epoch is the old one + 1, which the new master's will be at least.
/// `done` runs once, on the connection's executor.
void ask_for_master(connection& link, const std::string& name, master_answer done);

/// The log-in step that checks that a node found through Sentinel is the master (ROLE): a
/// sentinel may answer with a master that was demoted since.
log_in_step master_role_check();

}  // namespace dlock::redis::detail
