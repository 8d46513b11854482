// Private to dlock::etcd: one Watch stream per provider, carrying every one-shot watch of its
// waiters (a predecessor's key, a semaphore's queue) and holders (their own key), and the
// lasting watches of election observers (an election's queue).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "bidi_stream.hpp"
#include "client.hpp"

namespace dlock::etcd::detail {

enum class watch_event {
  deleted,  ///< a key of the watched range was deleted
  changed,  ///< keys of a followed range were put or deleted (follow())
  recheck,  ///< the watch ended without telling (stream broken, revision compacted): look again
};

/// The provider's watches. Each watch() fires once, then is gone; a follow() fires on every
/// change until cancelled. A broken stream fires `recheck` on every watch of either kind (they
/// are gone then), and the next watch opens a new stream.
///
/// Thread safety: the io thread only.
class watcher : public std::enable_shared_from_this<watcher> {
 public:
  using handler = std::function<void(watch_event)>;
  /// Called once etcd has created the watch, with the revision it watches from the next of.
  using created_handler = std::function<void(std::int64_t revision)>;

  explicit watcher(etcd_client& client) : client_(client) {}

  /// Watches deletes of keys in [key, range_end) (range_end empty: `key` alone) from
  /// `start_revision` on (0: from the revision at which etcd creates the watch; `on_created`
  /// hears which). Returns the id for cancel().
  ///
  /// A start revision in the past makes an "unsynced" watch, which etcd catches up every
  /// 100 ms: correct, but its events may come up to 100 ms late.
  std::uint64_t watch(std::string key, std::string range_end, std::int64_t start_revision,
                      handler on_event, created_handler on_created = {});
  /// Follows every put and delete of keys in [key, range_end) from the revision at which etcd
  /// creates the watch (which `on_created` hears): `on_event` gets `changed` for each batch of
  /// events, until cancel(), or `recheck` once when the watch ends without being cancelled.
  std::uint64_t follow(std::string key, std::string range_end, handler on_event,
                       created_handler on_created);
  /// Forgets the watch `id` (a no-op if it fired already). Its handler is not called.
  void cancel(std::uint64_t id);
  /// Ends the stream; no handler is called after it.
  void close();

 private:
  using stream = bidi_stream<pb::WatchRequest, pb::WatchResponse>;
  struct entry {
    std::string key;
    std::string range_end;
    std::int64_t start_revision = 0;
    handler on_event;
    created_handler on_created;
    bool follows = false;  ///< every put and delete, until cancelled (follow())
  };

  std::uint64_t add(entry e);

  void ensure_stream();
  void send_create(std::uint64_t id, const entry& e);
  void on_response(const pb::WatchResponse& response);
  void on_stream_done(const std::shared_ptr<stream>& ended);
  void fire(std::uint64_t id, watch_event event);

  etcd_client& client_;
  std::shared_ptr<stream> stream_;
  std::map<std::uint64_t, entry> watches_;
  std::uint64_t next_id_ = 1;
  bool closed_ = false;
};

}  // namespace dlock::etcd::detail
