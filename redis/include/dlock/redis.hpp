// dlock/redis.hpp: the Redis backend (one server, or RedLock over several).
#pragma once

#include <dlock/core.hpp>
#include <dlock/redis/fencing.hpp>
#include <dlock/redis/options.hpp>
#include <dlock/redis/provider.hpp>
