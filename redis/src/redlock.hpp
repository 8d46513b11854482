// Private to dlock::redis: the provider's servers as one voting body. One server, or N
// independent servers for RedLock: every step fans out to all of them and settles as soon as a
// quorum decided it (a silent minority costs nothing), a try that did not win is given back
// everywhere, and a grant is valid for expiry - elapsed - drift.
//
// Everything here runs on the backend's network thread, except eval_here(), the validity
// arithmetic and the read-only accessors.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/core/detail/unique_function.hpp>
#include <dlock/redis/options.hpp>

#include "cluster_router.hpp"
#include "keys.hpp"
#include "node.hpp"
#include "reply.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

class sentinel_master;

/// RedLock's clock-drift allowance for a lease of `expiry`: 1 % of it plus 2 ms.
std::chrono::nanoseconds clock_drift(std::chrono::nanoseconds expiry) noexcept;

/// When a grant whose request was sent at `sent` stops being valid: sent + expiry - drift.
/// Any later time is "expiry - elapsed - drift" from then on; once it has passed, the grant
/// may belong to someone else (and at acquire, a grant already past it is void).
std::chrono::steady_clock::time_point valid_until(std::chrono::steady_clock::time_point sent,
                                                  std::chrono::nanoseconds expiry) noexcept;

/// Settles a fan-out to every node: one result per node, in node order.
using fan_out_handler = dlock::detail::unique_function<void(std::vector<command_result>)>;

/// When a fan-out settles: as soon as `need` nodes gave an answer that `counts`, or once so
/// many did not that `need` is out of reach and it is known whether `need` nodes replied at all
/// (so that "taken by a majority" is never reported as "unreachable"). A node that has not
/// answered by then (silent: paused, partitioned) adds no time. It appears in the results as
/// the failure no_reply_yet, and its late answer is dropped: whoever settled without it must
/// give back what it may still grant (node_set::give_back, sent on the same connection, so
/// behind it). quorum_count.hpp decides it.
struct quorum_rule {
  std::size_t need;
  bool (*counts)(const command_result&);
};

/// The failure of a node not heard from when its fan-out settled.
inline constexpr const char* no_reply_yet = "no reply yet";

/// An answer that is a reply and no error: a release or read that a node confirmed.
bool confirmed(const command_result& result) noexcept;

/// The nodes of one provider, in the order of options::servers; or a Redis Cluster, which
/// votes as one node (each name lives on the master of its slot: cluster_router).
///
/// Lifetime: held by the backend in a shared_ptr; a give-back still retrying holds it weakly
/// and stops once it is gone.
class node_set : public std::enable_shared_from_this<node_set> {
 public:
  /// Makes (does not connect) one node per server. Requires: `opts` validated.
  node_set(boost::asio::any_io_executor executor, const options& opts);

  /// "host:port[,host:port...]", for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }
  std::size_t size() const noexcept { return cluster_ ? 1 : nodes_.size(); }
  /// Node `i` (Sentinel's one node: its master). Not in a cluster, which routes by slot.
  node& at(std::size_t i) { return *nodes_.at(i); }
  /// A Redis Cluster: every command goes by its key's slot, never from the caller's thread.
  bool routed_by_slot() const noexcept { return cluster_ != nullptr; }
  /// A Redis Cluster's masters (cluster_router::masters). Only in a cluster.
  void cluster_masters(cluster_router::masters_handler done) { cluster_->masters(std::move(done)); }
  /// Where waiters of `channel` listen on node `i` (in a cluster: the channel's slot's master).
  void listen(std::size_t i, const std::string& channel,
              const std::shared_ptr<channel_listener>& listener);
  void unlisten(std::size_t i, const std::string& channel, const channel_listener* listener);
  std::chrono::steady_clock::time_point subscriber_heard_at(std::size_t i,
                                                            const std::string& channel);
  std::size_t majority() const noexcept { return size() / 2 + 1; }
  /// How many nodes must grant and keep confirming a grant of `kind`: a majority, but every
  /// node for a semaphore. Majorities of different holders overlap in one node only, so with
  /// slots counted per node they could admit more than max_count holders in all.
  std::size_t quorum(key_kind kind) const noexcept {
    return counted_on_every_node(kind) ? size() : majority();
  }

  /// Runs `which` on every node at once; `done` gets the results when `rule` settles it.
  void eval_everywhere(const script& which, const key_set& keys,
                       const std::vector<std::string>& arguments, quorum_rule rule,
                       fan_out_handler done);
  /// Sends `arguments` to every node at once; `done` as for eval_everywhere.
  void command_everywhere(const std::vector<std::string>& arguments, quorum_rule rule,
                          fan_out_handler done);
  /// Runs `which` on node 0 from the calling thread, blocking (any thread). Not in a cluster.
  command_result eval_here(const script& which, const key_set& keys,
                           const std::vector<std::string>& arguments);

  /// Releases whatever `token` may hold under `keys` on every node, answered or not, and again
  /// on a node that gives no reply, until the grant would have expired. `done` settles once a
  /// majority confirmed (or cannot; a semaphore's once every node answered): a silent node's
  /// release goes on being retried after it.
  void release(const key_set& keys, const std::string& token, fan_out_handler done);
  /// What a give-back does with the waiter's place in the queue (key_set::queue): leaves it,
  /// or keeps it (a RedLock waiter's minority grant: its turn is not over).
  enum class queue_place { leave, keep };
  /// release() with nobody waiting for it, for a try that did not win or whose reply was lost:
  /// what was never granted keeps no minimum hold. Its retries on a node that gave no reply stop
  /// once `superseded` is set: the waiter's next try with the same token has been sent, and a
  /// retry arriving after it would delete what that try may be granted (the partition nemesis
  /// found two holders so).
  void give_back(const key_set& keys, const std::string& token,
                 queue_place place = queue_place::leave,
                 std::shared_ptr<const bool> superseded = {});
  /// Takes a waiter that gives up out of the queues (key_set::queue, a writer's waiting mark)
  /// on every node, and again on a node that gives no reply, until its place would have
  /// expired. `done` settles as release()'s.
  void withdraw(const key_set& keys, const std::string& token, fan_out_handler done);

  /// What is known of each node's connection (not tracked in a cluster, whose nodes come and
  /// go with its slot map).
  server_links& links() noexcept { return *links_; }
  const server_links& links() const noexcept { return *links_; }

  /// The master of a Sentinel deployment (then the one node reaches it); null otherwise.
  const std::shared_ptr<sentinel_master>& sentinel() const noexcept { return sentinel_; }

  /// The endpoints of the nodes whose results failed, separated by "; ", with their failures.
  std::string failures(const std::vector<command_result>& results) const;

 private:
  void eval_on(std::size_t i, const script& which, const key_set& keys,
               const std::vector<std::string>& arguments, reply_handler done);
  /// What a release_on() sends: a release of the grant (which keeps a lock's minimum hold), a
  /// give-back of a try that did not win (which keeps none), or a waiter's withdrawal.
  enum class undo { release, give_back, withdraw };
  void release_on(std::size_t i, const key_set& keys, const std::string& token, undo what,
                  queue_place place, std::chrono::steady_clock::time_point until,
                  std::shared_ptr<const bool> superseded,
                  reply_handler first_answer);
  void release_everywhere(const key_set& keys, const std::string& token, undo what,
                          queue_place place, std::shared_ptr<const bool> superseded,
                          fan_out_handler done);

  boost::asio::any_io_executor executor_;
  std::chrono::nanoseconds expiry_;
  std::chrono::nanoseconds command_timeout_;
  std::string endpoint_;
  std::shared_ptr<server_links> links_ = std::make_shared<server_links>();
  std::vector<std::unique_ptr<node>> nodes_;
  std::shared_ptr<sentinel_master> sentinel_;
  std::unique_ptr<cluster_router> cluster_;
};

}  // namespace dlock::redis::detail
