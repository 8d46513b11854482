// A ZooKeeper session over the C client, and the four-letter-word probe, for the test-server
// tests.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "test_servers.hpp"

namespace support {

/// "127.0.0.1:2181,127.0.0.1:2182": the connect string of the C client for an endpoint URL.
std::string zookeeper_hosts(std::string_view url);

/// A session of the C client's single-threaded build (the one dlock::zookeeper links; a
/// program cannot link the threaded one beside it). A thread of the session's own drives the
/// client, as the threaded build's would: it polls the socket zookeeper_interest() names, for
/// the time it names, and runs zookeeper_process(), so the session keeps its pings going while
/// a test does something else. Each call below makes one asynchronous call and waits for its
/// completion. Thread safety: one thread at a time.
class zookeeper_session {
 public:
  /// Opens a session to `hosts` and waits until it is connected. Throws std::runtime_error
  /// naming the hosts when that does not happen within `timeout`.
  explicit zookeeper_session(const std::string& hosts,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~zookeeper_session();
  zookeeper_session(const zookeeper_session&) = delete;
  zookeeper_session& operator=(const zookeeper_session&) = delete;

  /// Creates the persistent node `path`, checks it exists, deletes it and checks it is gone.
  /// Returns the first ZooKeeper error code other than ZOK, or ZOK (0) when every step worked.
  int create_and_delete(const std::string& path);

  /// The children of `path` (empty when it does not exist). Throws std::runtime_error with
  /// the ZooKeeper error otherwise.
  std::vector<std::string> children(const std::string& path);

  /// The czxid of `path` (the zxid of its creation), or -1 when it does not exist.
  std::int64_t czxid(const std::string& path);

  /// Creates the persistent node `path` with open ACL; returns the ZooKeeper error code.
  int create(const std::string& path);

  /// Deletes the node `path`; returns the ZooKeeper error code (ZOK, ZNONODE, ZNOAUTH, ...).
  int remove(const std::string& path);

  /// Waits until the server this session reads from has caught up with the leader (ZooKeeper's
  /// sync), so that the next read sees every write other sessions completed before the call.
  /// Throws std::runtime_error when the sync fails or takes longer than `timeout`.
  void sync(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  /// Adds digest credentials "user:password" to the session, and waits until the server took
  /// them. Throws std::runtime_error with the ZooKeeper error otherwise.
  void add_digest_auth(const std::string& credentials);

  /// The data of the node `path`. Throws std::runtime_error with the ZooKeeper error.
  std::string data(const std::string& path);

  /// Makes a call of the C client's asynchronous API whose completion is a void_completion_t
  /// (zoo_amulti, say: a docs recipe): `start` makes it on the handle, passing `completion`
  /// and `data` on, and returns its code. Returns the completion's code, or the start's when
  /// that is not ZOK. What the call writes into (zoo_amulti's results) must live until this
  /// returns. Throws std::runtime_error when no answer comes within `timeout`; the session is
  /// closed then, so no answer comes later.
  using void_call = std::function<int(zhandle_t* handle, void_completion_t completion,
                                      const void* data)>;
  int call(const void_call& start, std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  /// What a completion left: its code, and what the call asked for.
  struct answer;
  /// Makes the call `start` with the completion data `reply` and waits for the answer.
  void ask(const std::function<int(zhandle_t*, answer*)>& start, answer& reply,
           std::chrono::milliseconds timeout);
  /// Stops the session's thread and closes the session. Idempotent.
  void close() noexcept;
  /// The session's thread: drives the client until stop_.
  void pump();
  void wake() const;
  static void on_event(zhandle_t*, int, int, const char*, void* context);

  std::mutex mutex_;  // every use of the client: it has no locks of its own
  std::condition_variable changed_;  // a completion ran, or the session's state changed
  zhandle_t* handle_ = nullptr;      // null once closed
  bool stop_ = false;
  int wake_fd_ = -1;  // an eventfd: a call was made, or stop_ was set
  std::thread pump_thread_;
};

/// Sends a four-letter word ("srvr") to 127.0.0.1:`port`; returns the whole reply, or nullopt
/// when the server does not answer within `timeout`.
std::optional<std::string> zookeeper_four_letter_word(int port, std::string_view word,
                                                      std::chrono::milliseconds timeout);

/// The "Mode:" of the server at `port` ("standalone", "leader", "follower"), or "" when it does
/// not answer `srvr` within `timeout` or does not serve.
std::string zookeeper_mode(int port, std::chrono::milliseconds timeout = std::chrono::seconds(1));

}  // namespace support
