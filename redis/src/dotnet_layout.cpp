#include "dotnet_layout.hpp"

#include <stdexcept>

#include <dlock/core/backend/backend.hpp>

#include "cluster_slots.hpp"
#include "keys.hpp"

namespace dlock::redis::detail {

namespace {

// Written from DistributedLock.Redis 1.x's scripts (RedisReaderWriterLockPrimitives.cs,
// RedisSemaphorePrimitive.cs), with dlock's fencing token and retries on top:
// - a reader adds its token to the set `<name>.readers`, whose TTL only grows, unless the
//   string `<name>.writer` exists (a writer, or a writer's waiting mark);
// - a writer sets `<name>.writer` to its token once the reader set is empty; while readers
//   hold it, a writer that will wait leaves `<token>_WRITERWAITING` there, which holds back new
//   readers, and only that writer may replace it;
// - a semaphore is the sorted set `<name>` of tokens scored by the server's time (ms) plus the
//   expiry; entries whose score passed are purged before counting, and the set lives 3 expiries.
// KEYS: {writer, fence, readers} of a reader-writer lock, {set, fence} of a semaphore.
constexpr const char* functions = R"lua(
local function dotnet_acquire(token, expiry, kind, max_count, will_wait, granted, fence, again)
  if kind == 'dnwrite' then
    local writer = redis.call('GET', KEYS[1])
    if writer == token then
      redis.call('PEXPIRE', KEYS[1], expiry)
      return again()
    end
    local waiting = token .. '_WRITERWAITING'
    if writer and writer ~= waiting then return {0, redis.call('PTTL', KEYS[1])} end
    if redis.call('SCARD', KEYS[3]) == 0 then
      redis.call('SET', KEYS[1], token, 'PX', expiry)
      return granted(fence())
    end
    if writer or will_wait then redis.call('SET', KEYS[1], waiting, 'PX', expiry) end
    return {0, redis.call('PTTL', KEYS[3])}
  end
  if kind == 'dnread' then
    if redis.call('SISMEMBER', KEYS[3], token) == 1 then
      lengthen(KEYS[3], expiry)
      return again()
    end
    if redis.call('EXISTS', KEYS[1]) == 1 then return {0, redis.call('PTTL', KEYS[1])} end
    redis.call('SADD', KEYS[3], token)
    lengthen(KEYS[3], expiry)
    return granted(fence())
  end
  if kind == 'dnsem' then
    local now = now_ms()
    local score = redis.call('ZSCORE', KEYS[1], token)
    if score and tonumber(score) > now then
      redis.call('ZADD', KEYS[1], 'XX', now + expiry, token)
      lengthen(KEYS[1], 3 * expiry)
      return again()
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    if redis.call('ZCARD', KEYS[1]) < max_count then
      redis.call('ZADD', KEYS[1], now + expiry, token)
      lengthen(KEYS[1], 3 * expiry)
      return granted(fence())
    end
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {0, math.max(0, math.floor(tonumber(first[2]) - now))}
  end
  return nil
end
-- 1 if the grant was ours and is gone; a writer's waiting mark goes too (a give-back, or a
-- waiter's withdrawal: 'dnwithdraw'), and counts as freed, since readers waited behind it,
-- but for a RedLock waiter giving back a minority (`keep`): it is still waiting.
local function dotnet_release(token, kind, keep)
  if kind == 'dnwrite' or kind == 'dnwithdraw' then
    local writer = redis.call('GET', KEYS[1])
    if writer == token or (writer == token .. '_WRITERWAITING' and not keep) then
      redis.call('DEL', KEYS[1])
      return 1
    end
    return 0
  end
  if kind == 'dnread' then return redis.call('SREM', KEYS[3], token) end
  if kind == 'dnsem' then return redis.call('ZREM', KEYS[1], token) end
  return nil
end
local function dotnet_extend(token, kind, expiry)
  if kind == 'dnwrite' then
    if redis.call('GET', KEYS[1]) ~= token then return 0 end
    redis.call('PEXPIRE', KEYS[1], expiry)
    return 1
  end
  if kind == 'dnread' then
    if redis.call('SISMEMBER', KEYS[3], token) == 0 then return 0 end
    lengthen(KEYS[3], expiry)
    return 1
  end
  if kind == 'dnsem' then
    local now = now_ms()
    local score = redis.call('ZSCORE', KEYS[1], token)
    if not score or tonumber(score) <= now then return 0 end
    redis.call('ZADD', KEYS[1], 'XX', now + expiry, token)
    lengthen(KEYS[1], 3 * expiry)
    return 1
  end
  return nil
end
)lua";

}  // namespace

const char* dotnet_functions() noexcept { return functions; }

std::string dotnet_key_clash(const std::string& key) {
  return "the key '" + key +
         "' holds another primitive's value: in layout=dotnet a lock (a string) and a semaphore "
         "(a sorted set) of the same name share that key, as in .NET's DistributedLock; use "
         "different names for them";
}

key_set key_scheme::dotnet_keys(const acquire_request& request, const dlock::backend& owner) const {
  const std::string key = prefix_ + request.name;
  if (key.ends_with(plain_fence_suffix)) {
    throw std::invalid_argument(owner.message(
        "with layout=dotnet a name may not end in '" + std::string(plain_fence_suffix) +
            "' (the fencing counter of the name without it)",
        request.name));
  }
  const std::string fence = key + std::string(plain_fence_suffix);
  key_set keys;
  if (request.kind == resource_kind::reader_writer_lock) {
    keys = {request.mode == lock_mode::shared ? key_kind::dotnet_read : key_kind::dotnet_write,
            {key + ".writer", fence, key + ".readers"}, key + ":dlock-rw-released"};
  } else if (request.kind == resource_kind::semaphore) {
    keys = {key_kind::dotnet_semaphore, {key, fence}, key + ":dlock-sem-released"};
  } else {
    keys = {key_kind::lock, {key, fence}, key + ":dlock-released"};
  }
  // .NET's holders publish nothing when they release.
  keys.foreign_holders = true;
  if (shard_channels_) {
    const auto slot = hash_slot(keys.channel);
    for (const auto& k : keys.keys) {
      if (hash_slot(k) != slot) {
        throw std::invalid_argument(owner.message(
            "on a Redis Cluster with layout=dotnet a name needs a hash tag, as in "
            "'{" + request.name + "}', so that its keys ('" + keys.keys[0] + "', '" + fence +
                "') share a hash slot",
            request.name));
      }
    }
  }
  return keys;
}

}  // namespace dlock::redis::detail
