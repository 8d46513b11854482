// dlock/dlock.hpp: the umbrella header: the core API, every backend this build has, and
// make_provider(url).
#pragma once

#include <memory>
#include <string_view>

#include <dlock/core.hpp>
#include <dlock/core/backend/provider_url.hpp>
#include <dlock/dlock_config.hpp>
#if DLOCK_HAS_FILE
#include <dlock/file.hpp>
#endif
#if DLOCK_HAS_MEMORY
#include <dlock/memory.hpp>
#endif
#if DLOCK_HAS_REDIS
#include <dlock/redis.hpp>
#endif
#if DLOCK_HAS_POSTGRES
#include <dlock/postgres.hpp>
#endif
#if DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper.hpp>
#endif
#if DLOCK_HAS_MYSQL
#include <dlock/mysql.hpp>
#endif
#if DLOCK_HAS_ETCD
#include <dlock/etcd.hpp>
#endif

namespace dlock {

/// Builds the provider a URL describes, with any backend this build has:
/// `file:///var/lock/app`, `memory://` (one process),
/// `redis://[user:pw@]host:6379/0?expiry=30s` (several hosts: RedLock),
/// `postgres://user:pw@host:5432/db`, `zookeeper://h1:2181,h2:2181/locks`,
/// `mysql://user:pw@host:3306/db` (`mariadb://` too),
/// `etcd://[user:pw@]h1:2379,h2:2379/locks?lease=10s`.
/// The URL's query holds the backend's options (docs per backend); an unknown one is an error.
/// Throws: std::invalid_argument for a malformed URL, unknown scheme or option (naming it);
/// dlock::connection_error when the backend cannot be reached or set up.
std::shared_ptr<provider> make_provider(std::string_view url);

}  // namespace dlock
