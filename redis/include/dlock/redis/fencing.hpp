// dlock/redis/fencing.hpp: the resource side of fencing for a value kept in Redis.
//
// A holder paused past its lease may wake up and write after a newer holder did. The script
// below makes Redis itself refuse that write: beside the value it keeps the highest fencing
// token that wrote it, and it writes only for a token at least that high, in one atomic step.
// Run it with any client (hiredis, redis-plus-plus, redis-cli); docs/fencing.md has the
// recipe and its test.
#pragma once

#include <string_view>

namespace dlock::redis {

/// EVAL script: KEYS[1] the value's key; KEYS[2] its fence key (the highest token that wrote
/// it, which must outlive every holder: give it no expiry); ARGV[1] the writer's fencing token
/// in decimal without leading zeros (std::to_string of lock_handle::fencing_token()); ARGV[2]
/// the value. Sets KEYS[1] to ARGV[2] and KEYS[2] to ARGV[1] when ARGV[1] is at least the
/// fence, and returns 1; returns 0, writing nothing, for an older token. Tokens are compared as
/// decimal strings (length first), since Lua's numbers lose integers above 2^53. In a Redis
/// Cluster both keys need the same hash tag, "{order:17}" and "{order:17}:fence", say.
inline constexpr std::string_view fenced_set_script = R"lua(
local fence = redis.call('GET', KEYS[2])
local token = ARGV[1]
if fence and (#token < #fence or (#token == #fence and token < fence)) then
  return 0
end
redis.call('SET', KEYS[2], token)
redis.call('SET', KEYS[1], ARGV[2])
return 1
)lua";

}  // namespace dlock::redis
