// Private to dlock::redis: the Lua scripts that make each step atomic on a server.
//
// Every script takes the same KEYS of a name (keys.hpp: key_set) and dispatches on a kind
// argument: "lock" (an exclusive lock), "read" and "write" (a reader-writer lock), "sem" (a
// semaphore; keys.hpp: script_argument). eval.hpp calls them by SHA (EVALSHA) and sends them
// in full (EVAL) only after NOSCRIPT.
#pragma once

#include <chrono>
#include <string>

namespace dlock::redis::detail {

/// A duration as the scripts take it: whole milliseconds, in decimal.
std::string milliseconds_argument(std::chrono::nanoseconds duration);

struct script {
  std::string source;
  std::string sha1;  ///< of source, as SCRIPT LOAD would answer
};

/// ARGV: token, expiry ms, kind, proposal (0: bump the counter; else a RedLock proposal),
/// max_count, queue ("1": a writer that will wait registers so that new readers hold back),
/// owner (recorded with the grant in the name's owners hash, docs/redis.md), epoch key, the
/// waiters' queue (key_set::queue), with RedLock the waiter's arrival (ms by its clock, its
/// place in every server's queue), then a lock's minimum hold (ms, 0: none) and its hold key
/// (key_set::hold; a taken answer then counts to the hold's end when sooner). Returns {1,
/// fencing token} granted; {0, ms until it may free} taken (-1: no expiry); {-1, counter} the
/// proposal is not above this node's counter; {-2, stored max_count} the semaphore is in use
/// with another max_count.
const script& acquire_script();

/// ARGV: token, kind ("withdraw": a waiting writer leaves the queue), channel, and optionally
/// how to publish (key_set::publish; PUBLISH when absent), the waiters' queue, "keep" (a
/// RedLock waiter's minority given back: it keeps its place there; otherwise a lock's release
/// leaves it) and the hold key (key_set::hold; empty for a give-back). Deletes the grant if it
/// is still ours, then publishes on the channel; within its minimum hold, leaves it to expire
/// at the hold's end instead and publishes nothing. Returns 1 if it was ours.
const script& release_script();

/// ARGV: token, kind, expiry ms, a lock's hold key. Extends the grant if it is still ours and
/// unexpired, never below what is left of its minimum hold; never re-creates it. Returns 1 if
/// extended, 0 if not ours.
const script& extend_script();

/// KEYS: key_scheme::inspection_keys. Returns {max_count or "", {token, kind, owner record, ms
/// left, ...}} with kind "exclusive", "write", "read", "slot" or "waiting-write".
const script& inspect_script();

/// KEYS: key_scheme::inspection_keys; ARGV: the name's release channels. Deletes every grant
/// of the name (not its fencing counter) and PUBLISHes on every channel. Returns the grants
/// removed.
const script& break_script();

/// KEYS of a semaphore; ARGV: max_count. Returns {holders, max_count} or {-2, stored}.
const script& count_script();

}  // namespace dlock::redis::detail
