// Private to dlock::redis: the backend behind dlock::redis::provider.
//
// Asynchronous Redis traffic runs on the backend's network thread (hiredis contexts are not
// thread-safe): waiting acquires (redis_acquire in redis_backend.cpp), the watchdog, RedLock
// fan-outs, releases from the network thread. On one server, a blocking acquire's first attempt
// and a release run on the caller's thread over a pool of blocking connections instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/io_thread.hpp>
#include <dlock/redis/provider.hpp>

#include "node.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

/// The keys and channel of one name of one primitive, and the kind the scripts dispatch on.
struct key_set {
  std::string kind;  ///< "lock", "read", "write" or "sem"
  std::vector<std::string> keys;
  std::string channel;
};

/// What the watchdog knows of one held grant. valid_until and registered are guarded by the
/// backend's mutex; `lost` is the handle's own lost signal.
struct held_grant {
  std::string name;
  key_set keys;
  std::string token;
  std::chrono::steady_clock::time_point valid_until;
  std::stop_source lost;
  bool registered = true;
};

/// One node's answer to the acquire script.
struct acquire_answer {
  enum class kind { granted, taken, stale, other_max_count, failed };
  kind outcome = kind::failed;
  long long value = 0;  ///< token, ms to wait (-1: no expiry), counter, or stored max_count
  std::string failure;  ///< when failed: the connection failure or the server's error
};
acquire_answer read_acquire_answer(const command_result& result);

/// RedLock's clock-drift allowance for a lease of `expiry`: 1 % of it plus 2 ms.
std::chrono::nanoseconds clock_drift(std::chrono::nanoseconds expiry) noexcept;

/// When a grant whose request was sent at `sent` stops being valid: sent + expiry - drift.
/// Any later time is "expiry - elapsed - drift" from then on; once it has passed, the grant
/// may belong to someone else (and at acquire, a grant already past it is void).
std::chrono::steady_clock::time_point valid_until(std::chrono::steady_clock::time_point sent,
                                                  std::chrono::nanoseconds expiry) noexcept;

/// A random 128-bit token as hex: the value that says a grant is ours.
std::string random_token();

/// Settles a fan-out to every node: one result per node, in node order.
using fan_out_handler = dlock::detail::unique_function<void(std::vector<command_result>)>;

class redis_backend final : public dlock::backend,
                            public std::enable_shared_from_this<redis_backend> {
 public:
  /// Throws std::invalid_argument for an invalid option.
  explicit redis_backend(options opts);
  ~redis_backend() override;

  std::string_view scheme() const noexcept override { return "redis"; }
  std::string endpoint() const override { return endpoint_; }
  bool running_in_this_thread() const noexcept override {
    return dlock::backend::running_in_this_thread() || network_->running_in_this_thread();
  }
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;
  /// On one server, a blocking acquire makes its first attempt on the caller's thread.
  bool acquires_inline() const noexcept override { return nodes_.size() == 1; }
  std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) override;
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;

  boost::asio::any_io_executor network_executor() const { return network_->executor(); }
  const options& settings() const noexcept { return options_; }
  std::size_t node_count() const noexcept { return nodes_.size(); }
  std::size_t majority() const noexcept { return nodes_.size() / 2 + 1; }
  /// How many nodes must grant and keep confirming a grant of `keys`: a majority, but every
  /// node for a semaphore. Majorities of different holders overlap in one node only, so with
  /// slots counted per node they could admit more than max_count holders in all.
  std::size_t quorum(const key_set& keys) const noexcept {
    return keys.kind == "sem" ? nodes_.size() : majority();
  }
  node& node_at(std::size_t i) { return *nodes_[i]; }

  /// The keys of `name` for a request of this kind and mode.
  key_set keys_for(const acquire_request& request) const;
  std::string lock_key(std::string_view name) const;

  /// Runs `script` on node `i` by SHA, sending its source after NOSCRIPT. On the network thread.
  void eval(std::size_t i, const script& which, const key_set& keys,
            std::vector<std::string> arguments, reply_handler done);
  /// Runs `script` on node `i` from the calling thread, blocking; NOSCRIPT handled as eval().
  command_result eval_here(std::size_t i, const script& which, const key_set& keys,
                           const std::vector<std::string>& arguments);
  /// Runs `script` on every node at once; `done` gets every node's result. On the network thread.
  void eval_everywhere(const script& which, const key_set& keys,
                       const std::vector<std::string>& arguments, fan_out_handler done);
  /// Releases whatever `token` may hold under `keys` on every node, answered or not (a try that
  /// did not win, or whose reply was lost), again while a node gives no reply, until the grant
  /// would have expired. On the network thread.
  void give_back(const key_set& keys, const std::string& token);
  void give_back_on(std::size_t i, const key_set& keys, const std::string& token,
                    std::chrono::steady_clock::time_point until);
  /// Sends `arguments` to every node at once. On the network thread.
  void command_everywhere(const std::vector<std::string>& arguments, fan_out_handler done);

  /// The endpoints of the nodes whose results failed, comma-separated, with their failures.
  std::string failures(const std::vector<command_result>& results) const;

  /// Makes the lease of a new grant and puts it under the watchdog. Any thread.
  std::unique_ptr<lease> grant(const std::string& name, const key_set& keys,
                               const std::string& token,
                               std::chrono::steady_clock::time_point valid_until,
                               std::uint64_t fencing_token);
  /// Releases `grant`: stops extending it first, then deletes it on every node. Waits for the
  /// answer unless called on the network thread or `wait` is false.
  /// Throws connection_error (when waiting) if no majority of nodes confirmed.
  void release(const std::shared_ptr<held_grant>& grant, bool wait);

  /// Subscriptions in use on every node (for tests of what a cancelled wait leaves behind).
  std::size_t channels_in_use();

 private:
  void schedule_watchdog();
  void watchdog_tick();
  void extend(const std::shared_ptr<held_grant>& grant);
  /// Posts `work` to the network thread and waits up to `timeout` for the promise it fulfils.
  /// Throws connection_error with `timed_out` when no answer came in time.
  template <typename Result, typename Work>
  Result call_on_network_thread(Work work, std::chrono::nanoseconds timeout,
                           const std::string& timed_out);

  options options_;
  std::string endpoint_;
  /// The provider's executor, for core's timers and the user's handlers.
  /// All Redis traffic, the watchdog included: a handler that blocks the provider's executor
  /// delays no extension and no release.
  std::unique_ptr<io_thread> network_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<held_grant>> held_;
  bool watchdog_running_ = false;
  std::chrono::steady_clock::time_point next_extension_;
  std::optional<boost::asio::steady_timer> watchdog_timer_;
};

}  // namespace dlock::redis::detail
