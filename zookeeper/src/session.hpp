// Private to dlock::zookeeper: the provider's one ZooKeeper session and the calls made in it.
//
// The C client (its zhandle, the single-threaded build) is driven by client_pump.hpp on the
// provider's io thread: it reads the answers there (a thread waiting for one reads it itself
// if the io thread is held up), and its completions and watchers run inside the pump and post
// on (completion_routes.hpp routes them) to where the connection state below changes and every
// recipe step runs, the same thread. A call is made under the pump's lock on the calling
// thread. Nothing here ever makes a blocking ZooKeeper call.
//
// Connection phases, each decided on the io thread:
//
//   connecting --connected--> connected --connection lost--> disconnected
//   disconnected --a sixth of the session timeout--> unreachable (acquires fail: connection
//       waiters and waiting acquires)
//   unreachable --another sixth--> every holder is lost (a third after the disconnection)
//   any --connected--> connected (cut-off deletes and orphans are cleaned up);
//   any --session expired--> holders lost, a new session opens
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/lease.hpp>
#include <dlock/zookeeper/options.hpp>

#include "client_pump.hpp"
#include "completion_routes.hpp"

namespace dlock::zookeeper::detail {

struct session_watcher_context;

class zk_session final : public std::enable_shared_from_this<zk_session> {
 public:
  /// `owner` words the messages and hears background errors; `contact_lost` marks every
  /// held lease lost. Both are used on the io thread only, and the owner closes the session
  /// and stops that thread before it goes.
  zk_session(const dlock::backend& owner, const options& opts, std::vector<ACL> acl,
             boost::asio::any_io_executor executor, std::function<void()> contact_lost);
  ~zk_session();

  /// Opens the session and waits up to connect_timeout for it. Throws connection_error.
  void open_and_wait();
  /// Closes the session (the client tells the server, waiting up to a few seconds for it).
  /// On the io thread, or once it has stopped: the owner stops it first. Idempotent.
  void close();

  // The ZooKeeper calls of the recipes. Each completes exactly once through `then`, posted to
  // the io thread (a call the client refuses completes with its error code).
  /// Each may be called from any thread, and is made there (client_pump::submit).
  /// `answer_on_client_thread` (here and below): `then` runs inside the client's processing
  /// of the answer (it must only post or hand the answer over), not posted after it.
  void create(const std::string& path, bool sequential_ephemeral, zk_handler then,
              const std::string& data = {}, bool answer_on_client_thread = false);
  /// Creates the persistent TTL node `path` (PERSISTENT_WITH_TTL): the server deletes it once
  /// it is `ttl` old and childless, within one container check interval. A server without
  /// extended types (zookeeper.extendedTypesEnabled) answers ZUNIMPLEMENTED.
  void create_ttl(const std::string& path, const std::string& data,
                  std::chrono::milliseconds ttl, zk_handler then,
                  bool answer_on_client_thread = false);
  void get_data(const std::string& path, zk_handler then, bool answer_on_client_thread = false);
  /// Writes `data` to `path` if its version is still `version` (-1: any).
  void set_data(const std::string& path, const std::string& data, std::int32_t version,
                zk_handler then, bool answer_on_client_thread = false);
  /// ZooKeeper's sync: the reads sent after it see every write completed before it, whichever
  /// member the session is on.
  void sync(const std::string& path, zk_handler then, bool answer_on_client_thread = false);
  void get_children(const std::string& path, zk_handler then, zk_handler* on_change = nullptr,
                    std::uint64_t* watch_id = nullptr, bool answer_on_client_thread = false);
  void exists(const std::string& path, zk_handler then, zk_handler* on_change = nullptr,
              std::uint64_t* watch_id = nullptr, bool answer_on_client_thread = false);
  /// Deletes `path`. ZNONODE counts as done. A delete cut off by a connection loss is
  /// retried after reconnecting (a session expiry removes the ephemeral node anyway);
  /// `then` gets the first attempt's code.
  void remove(const std::string& path, zk_handler then);
  /// As remove(), from a thread other than the io thread, waiting up to `timeout` for the
  /// first attempt's code; std::nullopt when none came in time.
  std::optional<int> remove_and_wait(const std::string& path, std::chrono::nanoseconds timeout);
  /// Creates `path` (with `leaf_data`) and its missing ancestors as container nodes (ZOK when
  /// all exist).
  void ensure_path(const std::string& path, zk_handler then, std::string leaf_data = {});
  /// Runs `then(nullptr)` on the io thread once the session is connected, or
  /// `then(connection_error)` once it is unreachable (disconnected for a sixth of the session
  /// timeout). Asked while unreachable already, it still waits a sixth of the timeout more for
  /// the client to reconnect (a heal may be moments old), then fails.
  void when_connected(std::function<void(std::exception_ptr)> then);
  /// Runs `then(connection_error)` on the io thread when the session becomes unreachable,
  /// unless forget_unreachable(id) came first. What a waiting acquire listens to: its watch
  /// alone would wait through any outage. Returns the id.
  std::uint64_t when_unreachable(std::function<void(std::exception_ptr)> then);
  void forget_unreachable(std::uint64_t id);
  /// Deletes every child of `parent` whose name starts with `prefix`: the node, if any, of a
  /// create whose answer was lost and which no acquire adopts. Now when connected, else once
  /// reconnected, however long the disconnection; forgotten when the session expires (the
  /// node went with it).
  void remove_orphans(const std::string& parent, const std::string& prefix);

  /// A session event from the C client, posted to the io thread.
  void on_session_event(int state);

  /// Waits until `answered(wait)` (which waits up to `wait` for the answers it counts) says
  /// they all came, or `deadline`. On the io thread it reads the answers itself; elsewhere it
  /// waits for the io thread, and reads them itself if the io thread is held up (a user's
  /// handler running on it) for more than a few milliseconds. Returns whether they came.
  bool await(const std::function<bool(std::chrono::nanoseconds wait)>& answered,
             std::chrono::steady_clock::time_point deadline);

  /// Since when the session has been without a server (nullopt while connected, and before
  /// the first connection, whose wait reports its own errors). Any thread.
  std::optional<std::chrono::steady_clock::time_point> disconnected_since() const noexcept;

  /// Until when the current session's grants are known valid (session_validity.cpp), shared
  /// with their leases; a new session after an expiry has a new one. Any thread.
  std::shared_ptr<const grant_validity> validity() const noexcept { return validity_.load(); }

 private:
  enum class phase { connecting, connected, disconnected, unreachable };

  void open();
  void on_connected();
  void on_disconnected();
  /// Records the start of an outage for disconnected_since(), unless one is running.
  void note_disconnection() noexcept;
  /// Fails acquires after t/6 and marks holders lost after t/3, unless connected meanwhile.
  void start_disconnect_clock();
  void on_unreachable();
  void on_expired();
  void on_auth_failed();
  void fail_connect_waiters(std::exception_ptr error);
  void retry_pending_removes();
  // session_validity.cpp: a new session handle's validity, its start at the connection, and
  // the read every t/6 whose answers renew it.
  void new_validity();
  void validity_connected();
  void schedule_validity_probe();
  void probe_validity();
  /// Lists the parent of each orphan prefix and deletes what carries it.
  void sweep_orphans();
  /// A get_children or exists call, with an optional watch (a null watcher sets none).
  using read_call = int (*)(zhandle_t*, const char* path, watcher_fn watcher,
                            void* watch_context, const void* context);
  void read(const std::string& path, zk_handler then, zk_handler* on_change,
            std::uint64_t* watch_id, const read_call& call, bool answer_on_client_thread);
  /// Calls `call(handle, context)` with the current handle through the pump (at once on the
  /// io thread, else queued for it); when the client refuses it (non-zero return), delivers
  /// that code to the route instead.
  using client_call = std::function<int(zhandle_t*, const void*)>;
  void issue(std::uint64_t route_id, client_call call);
  boost::asio::any_io_executor answers_on(bool client_thread) const;

  const dlock::backend& owner_;
  options options_;
  std::vector<ACL> acl_entries_;
  ACL_vector acl_{};
  boost::asio::any_io_executor executor_;
  std::function<void()> contact_lost_;
  // What the session watcher needs; outlives every handle (closed before it goes).
  std::unique_ptr<session_watcher_context> watcher_context_;

  // Holds the client's handle, and every use of it.
  std::shared_ptr<client_pump> pump_;

  // Touched on the io thread only.
  phase phase_ = phase::connecting;
  bool connected_before_ = false;  // the next connection is a reconnection (for metrics)
  // For health(), from any thread: steady_clock ticks since the disconnection, 0 if connected.
  std::atomic<std::int64_t> disconnected_since_{0};
  std::chrono::nanoseconds negotiated_timeout_{};
  boost::asio::steady_timer disconnect_timer_;
  // Ends the wait of callers who asked for a connection while the session was unreachable.
  boost::asio::steady_timer unreachable_grace_;
  std::deque<std::function<void(std::exception_ptr)>> connect_waiters_;
  std::vector<std::string> pending_removes_;
  std::map<std::uint64_t, std::function<void(std::exception_ptr)>> unreachable_waiters_;
  std::uint64_t next_unreachable_id_ = 0;
  struct orphan {
    std::string parent;
    std::string prefix;
  };
  std::vector<orphan> orphans_;

  // The validity of the current session; its handle's opening; whether it has connected yet.
  std::atomic<std::shared_ptr<grant_validity>> validity_;
  std::chrono::steady_clock::time_point opened_at_{};
  bool handle_fresh_ = false;
  bool validity_ticking_ = false;
  // When the read out was sent, in steady_clock ticks (0: none); cleared by its answer, on
  // any thread.
  std::atomic<std::int64_t> validity_probe_out_{0};
  boost::asio::steady_timer validity_timer_;

  // What open_and_wait() waits for: true once connected, or the authentication failure.
  blocking_reply<bool> first_connection_;
};

}  // namespace dlock::zookeeper::detail
