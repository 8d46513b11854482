// Private to dlock::zookeeper: the backend behind dlock::zookeeper::provider.
//
// One ZooKeeper session (the C client's zhandle) per provider. The C client calls completions
// and watchers on its own completion thread; they only post to the provider's io thread, where
// every recipe step runs (completion_routes.hpp routes them). Nothing here ever makes a
// blocking ZooKeeper call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/zookeeper/provider.hpp>

#include "completion_routes.hpp"

namespace dlock::zookeeper::detail {

class zookeeper_lease;
struct session_watcher_context;

class zookeeper_backend final : public dlock::backend,
                                public std::enable_shared_from_this<zookeeper_backend> {
 public:
  /// Validates `opts`. Throws std::invalid_argument naming a bad option.
  explicit zookeeper_backend(options opts);
  ~zookeeper_backend() override;

  std::string_view scheme() const noexcept override { return "zookeeper"; }
  std::string endpoint() const override { return endpoint_; }
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;
  /// max_count minus the lease nodes now; std::nullopt on the io thread (it cannot wait).
  /// Throws std::invalid_argument when the recorded max_count differs; connection_error.
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;

  /// Opens the session and waits up to connect_timeout for it. Throws connection_error.
  void start() override;

  const options& settings() const noexcept { return options_; }
  /// `<base_path>/<escaped name>`.
  std::string node_of(std::string_view name) const;

  // The ZooKeeper calls of the recipes. Each completes exactly once through `then`, posted to
  // the io thread (a call the client refuses completes with its error code).
  void create(const std::string& path, bool sequential_ephemeral, zk_handler then,
              const std::string& data = {});
  void get_data(const std::string& path, zk_handler then);
  void get_children(const std::string& path, zk_handler then, zk_handler* on_change = nullptr,
                    std::uint64_t* watch_id = nullptr);
  /// `answer_on_client_thread`: `then` runs on the client's completion thread (it must only
  /// post), sparing the io thread a wake-up for an answer that rarely matters.
  void exists(const std::string& path, zk_handler then, zk_handler* on_change = nullptr,
              std::uint64_t* watch_id = nullptr, bool answer_on_client_thread = false);
  /// Deletes `path`. ZNONODE counts as done. A delete cut off by a connection loss is
  /// retried after reconnecting (a session expiry removes the ephemeral node anyway);
  /// `then` gets the first attempt's code.
  void remove(const std::string& path, zk_handler then);
  /// Runs `then(nullptr)` on the io thread once the session is connected, or
  /// `then(connection_error)` when it stays disconnected for a session timeout.
  void when_connected(std::function<void(std::exception_ptr)> then);

  /// Creates `path` (with `leaf_data`) and its missing ancestors as container nodes (ZOK when
  /// all exist).
  void ensure_path(const std::string& path, zk_handler then, std::string leaf_data = {});
  /// The invalid_argument for a semaphore whose leases node records another max_count than
  /// the request's; nullptr when it matches or records none (a node Curator made).
  std::exception_ptr recorded_count_mismatch(const acquire_request& request,
                                        const std::string& recorded,
                                        const std::string& leases_path) const;

  // Held leases, watched for deletion and marked lost on session expiry.
  std::uint64_t add_held(zookeeper_lease* lease);
  void remove_held(std::uint64_t id);
  /// Watches a held lease's node: deleted (or its session ended), the lease is lost.
  void watch_held(std::uint64_t held_id, const std::string& node);
  void watch_held_when_connected(std::uint64_t held_id, const std::string& node);
  /// Deletes a released lease's node: waits (off the io thread) up to a session timeout for
  /// the answer. Throws connection_error when it could not be confirmed.
  void remove_released(const std::string& path, std::string_view name);

  /// A session event from the C client, posted to the io thread.
  void on_session_event(int state);

 private:
  void open_session();
  std::string connect_string() const;
  void on_connected();
  void on_disconnected();
  /// Fails connection waiters and marks holders lost unless connected within t/3.
  void start_disconnect_clock();
  void on_expired();
  void mark_all_lost();
  void retry_pending_removes();
  void on_held_node_event(std::uint64_t held_id, const std::string& node, int event);
  /// A get_children or exists call, with an optional watch (a null watcher sets none).
  using read_call = int (*)(zhandle_t*, const char* path, watcher_fn watcher,
                            void* watch_context, const void* context);
  void read(const std::string& path, zk_handler then, zk_handler* on_change,
            std::uint64_t* watch_id, const read_call& call, bool answer_on_client_thread = false);
  /// Calls `call(handle, context)` with the current handle under handle_mutex_; when the
  /// client refuses it (non-zero return), delivers that code to the route instead.
  void issue(std::uint64_t route_id, const std::function<int(zhandle_t*, const void*)>& call);

  options options_;
  std::string endpoint_;
  std::vector<ACL> acl_entries_;
  ACL_vector acl_{};
  // What the session watcher needs; outlives every handle (closed before it goes).
  std::unique_ptr<session_watcher_context> watcher_context_;

  std::mutex handle_mutex_;
  zhandle_t* handle_ = nullptr;

  // Session state, touched on the io thread only.
  bool connected_ = false;
  bool disconnected_too_long_ = false;
  std::chrono::milliseconds negotiated_timeout_{};
  std::optional<boost::asio::steady_timer> disconnect_timer_;
  std::deque<std::function<void(std::exception_ptr)>> connect_waiters_;
  std::vector<std::string> pending_removes_;

  // What start() waits for.
  std::mutex start_mutex_;
  std::condition_variable started_;
  bool start_connected_ = false;
  std::exception_ptr start_error_;

  std::mutex held_mutex_;
  std::uint64_t next_held_id_ = 0;
  struct held_lease {
    zookeeper_lease* lease;
    std::uint64_t watch_route;  // the route of the watch on its node
  };
  std::unordered_map<std::uint64_t, held_lease> held_;
};

}  // namespace dlock::zookeeper::detail
