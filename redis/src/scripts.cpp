#include "scripts.hpp"

#include <dlock/core/backend/naming.hpp>

#include "dotnet_layout.hpp"

namespace dlock::redis::detail {

namespace {

// Server time in ms: holder scores in sorted sets are compared with it, so that every client
// agrees on when a lease of a reader or a semaphore slot ran out.
constexpr const char* now_function = R"lua(
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- A set (or the semaphore's max_count) is shared by holders whose providers may have other
-- expiries: its key's TTL only ever grows, so that one holder's short expiry never cuts another's
-- entry short. A set just made by ZADD has no TTL yet (-1) and gets one here.
local function lengthen(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
)lua";

// The waiters' queue of an exclusive lock on one server (key_set::queue; RedLock: on each of
// its servers, ordered alike by the waiters' own arrival times, ties by token): a sorted set of
// tokens by arrival, and beside it (queue .. ':alive') each waiter's deadline, which its tries
// push on by an expiry; a waiter that stopped trying (gone, partitioned) leaves the head once its
// deadline passed. A release names the live head in its message, so only that waiter tries.
constexpr const char* queue_function = R"lua(
local function join_queue(queue, token, arrival, expiry)
  local now = now_ms()
  if not redis.call('ZSCORE', queue, token) then redis.call('ZADD', queue, arrival or now, token) end
  redis.call('HSET', queue .. ':alive', token, now + expiry)
  lengthen(queue, expiry)
  lengthen(queue .. ':alive', expiry)
end
local function queue_head(queue)
  local now
  while true do
    local first = redis.call('ZRANGE', queue, 0, 0)[1]
    if not first then return nil end
    -- Only a queue with someone in it asks the time: no waiter, no TIME.
    now = now or now_ms()
    local deadline = tonumber(redis.call('HGET', queue .. ':alive', first) or '0')
    if deadline > now then return first, deadline - now end
    redis.call('ZREM', queue, first)
    redis.call('HDEL', queue .. ':alive', first)
  end
end
local function leave_queue(queue, token)
  redis.call('HDEL', queue .. ':alive', token)
  return redis.call('ZREM', queue, token)
end
)lua";

// The name's owners hash (token -> "<fencing token> <granted at, server ms> <owner>"): KEYS[3]
// of a lock (an election's has its leader record after it), the last of a reader-writer lock's
// and a semaphore's KEYS; nil for an upgrade gate and a plain-key lock, which record no owner.
constexpr const char* owners_function = R"lua(
local function owners_key(kind)
  if kind == 'lock' then return KEYS[3] end
  if kind == 'sem' then return KEYS[4] end
  if kind == 'read' or kind == 'write' then return KEYS[5] end
  return nil  -- .NET's layout records no owners
end
)lua";

// A lock's minimum hold (docs/redis.md, "Minimum hold"): the key key_set::hold, beside the
// lock's key and in its hash tag, holds the granted token with PX min_hold, so its PTTL is what
// is left of the hold by the server's clock. The lock's key never lives less than that: while
// it is there, no acquirer of any version takes the name. nil hold (plain keys, .NET's layout,
// a give-back): none kept.
constexpr const char* hold_function = R"lua(
local function hold_left(hold, token)
  if not hold or hold == '' or not token or redis.call('GET', hold) ~= token then return 0 end
  return math.max(redis.call('PTTL', hold), 0)
end
)lua";

// KEYS: lock: {key, fence, owners} (an election's lock: {key, fence, owners, leader record});
// read/write: {writer, fence, readers, waiting writers, owners}; sem: {holders, fence,
// max_count, owners}.
constexpr const char* acquire_body = R"lua(
local token, expiry, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local proposal, max_count = tonumber(ARGV[4]), tonumber(ARGV[5])
local owners = owners_key(kind)
-- A grant records its owner in the same script, so no grant is ever seen without it.
local function granted(fencing_token)
  if owners then
    redis.call('HSET', owners, token, fencing_token .. ' ' .. now_ms() .. ' ' .. (ARGV[8] or ''))
    lengthen(owners, expiry)
  end
  return {1, fencing_token}
end
-- ARGV[9]: the waiters' queue of a lock, or none; ARGV[10], with RedLock: the waiter's arrival
-- (ms by its own clock), the same on every server, so that their queues agree on who is first
-- (one server: its own clock orders them).
local queue = kind == 'lock' and ARGV[9] and ARGV[9] ~= '' and ARGV[9]
local arrival = ARGV[10] and ARGV[10] ~= '' and tonumber(ARGV[10])
-- ARGV[11]: the lock's minimum hold in ms (0: none), ARGV[12] the key that keeps it. A grant
-- with a hold lives at least that long, and records its end (hold_function).
local min_hold, hold = tonumber(ARGV[11] or '0'), kind == 'lock' and ARGV[12]
if not hold or hold == '' then min_hold, hold = 0, nil end
local lease = math.max(expiry, min_hold)
local function keep_hold()
  if min_hold > 0 then redis.call('SET', hold, token, 'PX', min_hold) end
end
-- RedLock: a waiting try (ARGV[6]) joins before it may take the lock, wherever the lock is
-- contended (taken by another, or a queue already there), also when its proposal turns out
-- stale: every contender is then in every queue it reached, and the same one heads them all.
-- An uncontended try (free, no queue) only takes the lock.
-- The holder of a lock (or the writer), and whether the lock's queue has anyone, read once: an
-- uncontended try reads no more of the queue.
local holder = (kind == 'lock' or kind == 'write') and redis.call('GET', KEYS[1])
local queued = queue and redis.call('EXISTS', queue) == 1
if queue and arrival and ARGV[6] == '1' and ((holder and holder ~= token) or queued) then
  join_queue(queue, token, arrival, expiry)
  queued = true
end
if proposal > 0 then
  local current = tonumber(redis.call('GET', KEYS[2]) or '0')
  if current >= proposal then return {-1, current} end
end
-- ARGV[7], with Sentinel, names the key of the master's failover epoch (sentinel_master.hpp):
-- the counter is raised to epoch * 2^32 first, so a new master whose counter missed the last
-- grants of the old one (asynchronous replication) still issues higher tokens.
local epoch_key = ARGV[7]
local function fence()
  if proposal == 0 then
    if epoch_key and epoch_key ~= '' then
      local floor = tonumber(redis.call('GET', epoch_key) or '0') * 4294967296
      if floor > tonumber(redis.call('GET', KEYS[2]) or '0') then
        redis.call('SET', KEYS[2], string.format('%.0f', floor))
      end
    end
    return redis.call('INCR', KEYS[2])
  end
  redis.call('SET', KEYS[2], proposal)
  return proposal
end
-- Granted already to this token (the reply to an earlier try was lost, and the acquire tries
-- again with the same token): granted again, with a fresh lease; a single server's counter is
-- not raised again (the lost reply's token), RedLock's is set to the new proposal.
local function again()
  if proposal == 0 then return granted(tonumber(redis.call('GET', KEYS[2]) or '0')) end
  return granted(fence())
end
local dotnet = dotnet_acquire(token, expiry, kind, max_count, ARGV[6] == '1', granted, fence, again)
if dotnet then return dotnet end
if kind == 'lock' or kind == 'write' then
  if holder == token then
    keep_hold()
    redis.call('PEXPIRE', KEYS[1], math.max(lease, hold_left(hold, token)))
    if kind == 'write' then redis.call('ZREM', KEYS[4], token) end
    return again()
  end
end
if kind == 'lock' then
  -- Only the queue's live head may take a free lock; a waiting try joins the queue, or renews
  -- its place there.
  local head, head_left
  if queued then head, head_left = queue_head(queue) end
  if (not head or head == token) and redis.call('SET', KEYS[1], token, 'NX', 'PX', lease) then
    keep_hold()
    -- With RedLock a grant here may be a minority, given back: the waiter keeps its place
    -- until its release (release_body) leaves the queue.
    if head and not arrival then leave_queue(queue, token) end
    return granted(fence())
  end
  if queue and ARGV[6] == '1' then
    join_queue(queue, token, arrival, expiry)
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 and head_left then return {0, head_left} end
  -- A holder's release within its hold publishes nothing: the key just expires at the hold's
  -- end, so a waiter looks again then (and listens for a release after it, as before).
  local held_for = hold_left(hold, holder)
  if held_for > 0 and held_for < ttl then return {0, held_for} end
  return {0, ttl}
end
local now = now_ms()
local function held_in(set)
  local score = redis.call('ZSCORE', set, token)
  if not score or tonumber(score) <= now then return false end
  redis.call('ZADD', set, 'XX', now + expiry, token)
  lengthen(set, expiry)
  return true
end
if kind == 'sem' and held_in(KEYS[1]) then
  lengthen(KEYS[3], expiry)
  return again()
end
if kind == 'read' and held_in(KEYS[3]) then return again() end
local function first_expiry(set)
  local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) - now end
  return expiry
end
if kind == 'sem' then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  local count = redis.call('ZCARD', KEYS[1])
  if count == 0 then
    redis.call('SET', KEYS[3], max_count, 'PX', expiry)
  else
    local stored = tonumber(redis.call('GET', KEYS[3]) or max_count)
    if stored ~= max_count then return {-2, stored} end
  end
  if count < max_count then
    redis.call('ZADD', KEYS[1], now + expiry, token)
    lengthen(KEYS[1], expiry)
    lengthen(KEYS[3], expiry)
    return granted(fence())
  end
  return {0, first_expiry(KEYS[1])}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local writer_ttl = redis.call('PTTL', KEYS[1])
if kind == 'read' then
  if writer_ttl == -2 and redis.call('ZCARD', KEYS[4]) == 0 then
    redis.call('ZADD', KEYS[3], now + expiry, token)
    lengthen(KEYS[3], expiry)
    return granted(fence())
  end
  if writer_ttl >= 0 then return {0, writer_ttl} end
  return {0, first_expiry(KEYS[4])}
end
if writer_ttl == -2 and redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('SET', KEYS[1], token, 'PX', expiry)
  redis.call('ZREM', KEYS[4], token)
  return granted(fence())
end
if ARGV[6] == '1' then
  redis.call('ZADD', KEYS[4], now + expiry, token)
  lengthen(KEYS[4], expiry)
end
if writer_ttl >= 0 then return {0, writer_ttl} end
return {0, first_expiry(KEYS[3])}
)lua";

// ARGV: token, kind, channel, how to publish, the waiters' queue, "keep" for a RedLock
// waiter giving back a minority grant: it keeps its place (a release leaves the queue), and the
// lock's hold key (none for a give-back: what was never granted keeps nothing).
constexpr const char* release_body = R"lua(
local token, kind = ARGV[1], ARGV[2]
local queue = ARGV[5] and ARGV[5] ~= '' and ARGV[5]
local queued = queue and redis.call('EXISTS', queue) == 1
local released = 0
local hold = kind == 'lock' and ARGV[7]
-- Within the grant's minimum hold the key stays, with the token, until the hold's end: it
-- expires then by the server's clock, telling no one (an acquire's answer says when).
local held_for = 0
-- Also when the grant is no longer ours (broken, expired): its record goes with it.
local owners = kind ~= 'withdraw' and owners_key(kind)
if owners then redis.call('HDEL', owners, token) end
local dotnet = dotnet_release(token, kind, ARGV[6] == 'keep')
if dotnet then
  released = dotnet
elseif kind == 'lock' or kind == 'write' then
  if redis.call('GET', KEYS[1]) == token then
    held_for = hold_left(hold, token)
    if held_for > 0 then
      redis.call('PEXPIRE', KEYS[1], held_for)
    else
      redis.call('DEL', KEYS[1])
      if kind == 'lock' and KEYS[4] then redis.call('DEL', KEYS[4]) end
    end
    released = 1
  end
  if queued and ARGV[6] ~= 'keep' then leave_queue(queue, token) end
  -- A writer's try whose answer never came (given back) may have left its waiting mark.
  if kind == 'write' and KEYS[4] and ARGV[6] ~= 'keep' then redis.call('ZREM', KEYS[4], token) end
elseif kind == 'read' then
  released = redis.call('ZREM', KEYS[3], token)
elseif kind == 'sem' then
  released = redis.call('ZREM', KEYS[1], token)
  if released == 1 and redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) end
elseif kind == 'withdraw' and queue then
  -- A waiter that gives up: when it was the head of a free lock, the next one is told.
  local head = queue_head(queue)
  leave_queue(queue, token)
  if head == token and redis.call('EXISTS', KEYS[1]) == 0 then released = 1 end
elseif kind == 'withdraw' then
  released = redis.call('ZREM', KEYS[4], token)
end
if released == 1 and held_for == 0 then
  -- With a queue, the message names its live head: the others do not wake. A RedLock waiter
  -- that gave back a minority and is still the head tells nobody: only it may take the lock.
  local message = queued and queue_head(queue) or 'released'
  if message ~= token then redis.call(ARGV[4] or 'PUBLISH', ARGV[3], message) end
end
return released
)lua";

constexpr const char* extend_body = R"lua(
local token, kind, expiry = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- ARGV[4]: a lock's hold key; its key never lives less than what is left of the hold.
local hold = kind == 'lock' and ARGV[4]
local dotnet = dotnet_extend(token, kind, expiry)
if dotnet then return dotnet end
if kind == 'lock' or kind == 'write' then
  if redis.call('GET', KEYS[1]) == token then
    redis.call('PEXPIRE', KEYS[1], math.max(expiry, hold_left(hold, token)))
    if owners_key(kind) then lengthen(owners_key(kind), expiry) end
    if kind == 'lock' and KEYS[4] then redis.call('PEXPIRE', KEYS[4], expiry) end
    return 1
  end
  return 0
end
local now = now_ms()
local set = KEYS[1]
if kind == 'read' then set = KEYS[3] end
local score = redis.call('ZSCORE', set, token)
if not score or tonumber(score) <= now then return 0 end
redis.call('ZADD', set, 'XX', now + expiry, token)
lengthen(set, expiry)
if kind == 'sem' then lengthen(KEYS[3], expiry) end
lengthen(owners_key(kind), expiry)
return 1
)lua";

// KEYS: inspection_keys (keys.hpp). Returns {max_count or '', {token, kind, record, ms left,
// ...}}: the live holders of every primitive of the name and the writers queued to wait.
constexpr const char* inspect_body = R"lua(
local now = now_ms()
local parties = {}
local function add(token, kind, left)
  local record = redis.call('HGET', KEYS[7], token) or ''
  for _, v in ipairs({token, kind, record, left}) do parties[#parties + 1] = v end
end
for _, held in ipairs({{KEYS[1], 'exclusive'}, {KEYS[2], 'write'}}) do
  local token = redis.call('GET', held[1])
  if token then add(token, held[2], redis.call('PTTL', held[1])) end
end
for _, set in ipairs({{KEYS[3], 'read'}, {KEYS[5], 'slot'}, {KEYS[4], 'waiting-write'}}) do
  local members = redis.call('ZRANGEBYSCORE', set[1], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #members, 2 do add(members[i], set[2], tonumber(members[i + 1]) - now) end
end
return {redis.call('GET', KEYS[6]) or '', parties}
)lua";

// KEYS: inspection_keys; ARGV: PUBLISH or SPUBLISH, then the release channels. Deletes every grant of the name (the
// fencing counter stays, so the next token is higher) and wakes every waiter. Returns how many
// grants it removed.
constexpr const char* break_body = R"lua(
local removed = 0
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[8]}) do removed = removed + redis.call('DEL', key) end
for _, key in ipairs({KEYS[3], KEYS[5]}) do
  removed = removed + redis.call('ZCARD', key)
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[6], KEYS[7])
for i = 2, #ARGV do redis.call(ARGV[1], ARGV[i], 'released') end
return removed
)lua";

constexpr const char* count_body = R"lua(
local max_count = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
local count = redis.call('ZCARD', KEYS[1])
-- .NET's layout keeps no max_count (KEYS[3]).
local stored = KEYS[3] and redis.call('GET', KEYS[3])
if count > 0 and stored and tonumber(stored) ~= max_count then return {-2, tonumber(stored)} end
return {count, max_count}
)lua";

// Never destroyed: a provider dropped inside one of its own handlers lets its network thread
// finish that handler after the last owner is gone, which may be after main() returned and
// static objects were destroyed.
const script& make_script(std::string source) {
  std::string sha1 = naming::sha1_hex(source);
  return *new script{std::move(source), std::move(sha1)};
}

}  // namespace

const script& acquire_script() {
  static const script& instance =
      make_script(std::string(now_function) + dotnet_functions() + queue_function +
                  owners_function + hold_function + acquire_body);
  return instance;
}

const script& release_script() {
  static const script& instance =
      make_script(std::string(now_function) + dotnet_functions() + queue_function +
                  owners_function + hold_function + release_body);
  return instance;
}

const script& extend_script() {
  static const script& instance =
      make_script(std::string(now_function) + dotnet_functions() + owners_function +
                  hold_function + extend_body);
  return instance;
}

const script& count_script() {
  static const script& instance = make_script(std::string(now_function) + count_body);
  return instance;
}

const script& inspect_script() {
  static const script& instance = make_script(std::string(now_function) + inspect_body);
  return instance;
}

const script& break_script() {
  static const script& instance = make_script(break_body);
  return instance;
}

std::string milliseconds_argument(std::chrono::nanoseconds duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count());
}

}  // namespace dlock::redis::detail
