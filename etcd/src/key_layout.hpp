// Private to dlock::etcd: where a name's contenders queue, and who goes first.
//
// Every primitive queues one key per contender under a prefix of its own, attached to the
// provider's lease and ordered by create revision, as etcd's concurrency.Mutex does: the
// plain lock's prefix is exactly the Mutex's, so `etcdctl lock` waits in the same line.
// Nothing here talks to etcd: acquire.cpp lists a queue and asks queue_verdict() what to do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/backend/backend.hpp>

namespace dlock::etcd::detail {

/// The queue of `name` for `kind` (one function, so a new kind is one line here):
/// `<base><kind segment><escaped name>/`. The lock's kind segment is empty; the others begin
/// with '.', which escaping never puts first, so no name's queue holds another's keys.
std::string queue_prefix(std::string_view base, resource_kind kind, std::string_view name);

/// The key a contender queues: `<queue><lease id in lowercase hex>` (concurrency.Mutex's), or
/// with `_<n>` appended for the n-th concurrent use of one queue by one provider (n > 0).
std::string contender_key(std::string_view queue, std::int64_t lease_id, std::uint64_t n);

/// What a contender's key holds: for the lock, the owner alone (concurrency.Mutex writes an
/// empty value and never reads it); for the reader-writer lock "read" or "write", for the
/// semaphore the decimal max_count, each followed by '\n' and the owner when there is one (an
/// owner holds no control character). Upgrade gates and election candidates hold nothing.
std::string contender_value(const acquire_request& request);

/// A contender's value taken apart: the mark ("read", "write", the max_count; empty for a
/// lock) and the owner.
struct contender_record {
  std::string_view mark;
  std::string_view owner;
};
contender_record parse_value(resource_kind kind, std::string_view value);

/// The max_count a semaphore contender's value records, if it is one.
std::optional<std::uint64_t> recorded_max_count(std::string_view value);

/// One key of a queue, as a listing shows it.
struct contender {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
};

/// What a contender does next, given the queue sorted by create revision.
struct verdict {
  enum class action {
    grant,         ///< nothing before us blocks us
    wait_for_key,  ///< watch `key` until it is deleted, then list again
    wait_for_any,  ///< watch the whole queue for deletes, then list again (semaphores)
    requeue,       ///< our key is not in the queue (deleted behind our back): queue again
  };
  action next = action::grant;
  std::string key;
  /// wait_for_key: the create revision of `key` (a key deleted and made again is another).
  std::int64_t key_revision = 0;
  /// A semaphore contender found with another max_count than ours (then `next` is moot).
  std::optional<std::uint64_t> other_max_count;
};

/// Decides for the contender `own_key` of `request` in `queue` (every key, in create-revision
/// order). A writer or a lock waits for every key before it; a reader for the write keys before
/// it (so a waiting writer holds back later readers); a semaphore contender until fewer than
/// max_count keys precede it. Keys of strangers count as contenders of the lock's kind.
verdict queue_verdict(const acquire_request& request, std::string_view own_key,
                      const std::vector<contender>& queue);

}  // namespace dlock::etcd::detail
