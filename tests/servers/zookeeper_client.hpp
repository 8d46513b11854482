// A ZooKeeper session over the C client, and the four-letter-word probe, for the test-server
// tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "test_servers.hpp"

typedef struct _zhandle zhandle_t;

namespace support {

/// "127.0.0.1:2181,127.0.0.1:2182": the connect string of the C client for an endpoint URL.
std::string zookeeper_hosts(std::string_view url);

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

  /// Adds digest credentials "user:password" to the session.
  void add_digest_auth(const std::string& credentials);

  /// The C client's handle, for a test that calls the C API itself (a docs recipe, say).
  zhandle_t* native() const noexcept { return handle_.get(); }

 private:
  struct handle_deleter {
    void operator()(zhandle_t* handle) const;
  };
  std::unique_ptr<zhandle_t, handle_deleter> handle_;
};

/// Sends a four-letter word ("srvr") to 127.0.0.1:`port`; returns the whole reply, or nullopt
/// when the server does not answer within `timeout`.
std::optional<std::string> zookeeper_four_letter_word(int port, std::string_view word,
                                                      std::chrono::milliseconds timeout);

/// The "Mode:" of the server at `port` ("standalone", "leader", "follower"), or "" when it does
/// not answer `srvr` within `timeout` or does not serve.
std::string zookeeper_mode(int port, std::chrono::milliseconds timeout = std::chrono::seconds(1));

}  // namespace support
