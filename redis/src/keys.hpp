// Private to dlock::redis: where a name lives on a server, the keys and the release channel of
// each primitive (docs/redis.md, "Keys"), and the key kind every script dispatches on.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/backend/backend.hpp>
#include <dlock/redis/options.hpp>

namespace dlock::redis::detail {

/// What the keys of a name hold, and so which branch of a script runs. The dotnet_ kinds are
/// the reader-writer lock and semaphore of the .NET layout (options::layout; dotnet_layout.cpp).
enum class key_kind { lock, read, write, semaphore, dotnet_read, dotnet_write, dotnet_semaphore };

/// The kind as the scripts spell it: "lock", "read", "write", "sem", "dnread", "dnwrite" or
/// "dnsem".
std::string_view script_argument(key_kind kind) noexcept;

/// The keys and channel of one name of one primitive. Every key of a name shares its hash tag.
struct key_set {
  key_kind kind = key_kind::lock;
  std::vector<std::string> keys;  ///< KEYS of the scripts; keys[1] is the fencing counter
  std::string channel;            ///< where a release publishes
  /// How: PUBLISH, or SPUBLISH in a cluster (the channel is a shard channel of the keys' slot).
  std::string publish = "PUBLISH";
  /// The waiters' queue of an exclusive lock or upgrade gate (scripts.cpp): its waiters are
  /// granted in turn and a release wakes only the next. Empty: none (other primitives, plain
  /// keys, RedLock).
  std::string queue;
  /// The key that keeps an exclusive lock's minimum hold (scripts.cpp, hold_function). Empty:
  /// none can be kept (other primitives, plain keys, .NET's layout).
  std::string hold;
  /// Other clients may hold these keys and release them without publishing (plain keys: any
  /// SET NX PX client), so a waiter tries again at least every foreign_release_poll.
  bool foreign_holders = false;
};

/// Appended to a lock's key in plain-key mode (and to a name's in .NET's layout), the key of
/// its fencing counter.
inline constexpr std::string_view plain_fence_suffix = ":dlock-fence";

/// How often a waiter tries a key that other clients may release without a word.
inline constexpr std::chrono::milliseconds foreign_release_poll{250};

/// What a waiter's withdrawal tells the release script: "withdraw", or "dnwithdraw" for a
/// writer of .NET's layout, whose waiting mark is in the writer key.
std::string_view withdraw_argument(key_kind kind) noexcept;

/// Whether holders of `kind` take slots counted on every RedLock node (a semaphore, either
/// layout), so that every node must grant and answer a release.
constexpr bool counted_on_every_node(key_kind kind) noexcept {
  return kind == key_kind::semaphore || kind == key_kind::dotnet_semaphore;
}

/// Maps names to keys under a prefix: dlock's layout, plain-key mode, or .NET's layout.
class key_scheme {
 public:
  /// `cluster`: the keys go to a Redis Cluster (shard channels; a name's keys must share a slot).
  key_scheme(std::string prefix, bool plain_keys, key_layout layout = key_layout::dlock,
             bool cluster = false)
      : prefix_(std::move(prefix)),
        plain_keys_(plain_keys || layout == key_layout::dotnet),
        dotnet_(layout == key_layout::dotnet),
        shard_channels_(cluster) {}

  /// .NET's layout: no owner records, queues or token per holder to inspect.
  bool dotnet_layout() const noexcept { return dotnet_; }

  /// The key that holds the exclusive lock `name`.
  std::string lock_key(std::string_view name) const;

  /// The keys of `request.name` for a request of this kind and mode.
  /// Throws std::invalid_argument (worded by `owner`) for a plain-key lock name that would be
  /// another lock's fencing counter, and in plain-key mode for a reader-writer lock or a
  /// semaphore (an election's keys are tagged in either mode).
  key_set keys_for(const acquire_request& request, const dlock::backend& owner) const;

  /// Every key a name's grants live in, for the inspect and break scripts: the lock, the
  /// reader-writer lock's writer, readers and waiting writers, the semaphore's holders and
  /// max_count, the owners hash, the upgrade gate (scripts.hpp).
  key_set inspection_keys(std::string_view name) const;
  /// The SCAN pattern of the fencing counters of every name beginning with `name_prefix`:
  /// every name ever granted keeps one, so a name held now is among them.
  std::string counters_pattern(std::string_view name_prefix) const;
  /// The name whose fencing counter is `key` (one that counters_pattern matched).
  std::string name_of_counter(std::string_view key) const;
  /// The release channels of every primitive of `name`: lock, reader-writer lock, semaphore,
  /// upgrade gate.
  /// The command a release publishes with: SPUBLISH to a cluster's shard channels, else PUBLISH.
  std::string publish_command() const { return shard_channels_ ? "SPUBLISH" : "PUBLISH"; }
  std::vector<std::string> release_channels(std::string_view name) const;

 private:
  key_set keys_for_name(const acquire_request& request, const dlock::backend& owner) const;
  key_set dotnet_keys(const acquire_request& request, const dlock::backend& owner) const;

  std::string prefix_;
  bool plain_keys_;  ///< a lock is the plain key `<prefix><name>` (also in .NET's layout)
  bool dotnet_;
  bool shard_channels_;
};

}  // namespace dlock::redis::detail
