// The backends of the partition scenarios, each with short leases or sessions so that the
// scenarios finish in seconds, and the bounds docs/<backend>.md gives for those settings.
#include <cstdlib>
#include <stdexcept>

#include "scenario.hpp"

namespace partition {

namespace {

// expiry 3 s: the watchdog extends every second, each command (per node) times out after a
// second; a lease not extended is gone after one expiry (docs/redis.md, "Faults").
std::string redis_url(const std::string& endpoint, const std::string& scope) {
  return endpoint + "?expiry=3s&release_timeout=1s&prefix=" + scope + ":";
}

constexpr bounds redis_bounds{.lost = 4s, .waiter_fails = 4s, .granted_after = 4s,
                              .grant_with_member_cut = 1s};

// keepalive 2 s: a session whose round trip goes unanswered a whole period is given up within
// 1.5 periods (docs/postgres.md, options table).
std::string postgres_url(const std::string& endpoint, const std::string&) {
  return endpoint + "?keepalive=2s&connect_timeout=2s&release_timeout=1s";
}
std::string postgres_session_per_lock_url(const std::string& endpoint, const std::string& scope) {
  return postgres_url(endpoint, scope) + "&locks_per_session=1";
}

constexpr bounds postgres_bounds{.lost = 4s, .waiter_fails = 4s, .granted_after = 4s,
                                 .grant_with_member_cut = 1s};

// session timeout 4 s: the client notices a silent server after 2/3 of it and marks handles lost
// a third later; the server expires the session after the whole of it (docs/zookeeper.md,
// "Sessions, connection loss and lost"). A session on a cut member moves to another member
// once the client notices, within 2/3 of the timeout.
std::string zookeeper_url(const std::string& endpoint, const std::string& scope) {
  return endpoint + "/" + scope + "?session_timeout=4s&connect_timeout=4s&release_timeout=1s";
}

constexpr bounds zookeeper_bounds{.lost = 5s, .waiter_fails = 5s, .granted_after = 5s,
                                  .grant_with_member_cut = 4s};

// keepalive 2 s: a connection whose round trip goes unanswered a whole period is given up
// within 1.5 periods; the server closes a silent client's connection after server_lease
// (2 × keepalive) (docs/mysql.md, "Faults").
std::string mariadb_url(const std::string& endpoint, const std::string&) {
  return endpoint + "?keepalive=2s&connect_timeout=2s&release_timeout=1s";
}

constexpr bounds mariadb_bounds{.lost = 4s, .waiter_fails = 4s, .granted_after = 5s,
                                .grant_with_member_cut = 1s};

// lease 3 s: renewed every second; a lease whose keepalives go unanswered for its TTL is lost
// (the server expires it no earlier), and every call carries a deadline of one TTL. A client
// on a cut member moves to another within 5 s (HTTP/2 keepalive) + TTL/3 (docs/etcd.md, "Lost,
// and the bounds under faults"), so the lease outlives that only with a TTL above it.
std::string etcd_url(const std::string& endpoint, const std::string& scope) {
  return endpoint + "/" + scope + "?lease=3s&release_timeout=1s&connect_timeout=4s";
}

constexpr bounds etcd_bounds{.lost = 4s, .waiter_fails = 4s, .granted_after = 5s,
                             .grant_with_member_cut = 7s};

const std::vector<backend_case>& all_backends() {
  static const std::vector<backend_case> backends{
      {"redis", "REDIS", {"redis"}, false, redis_bounds, redis_url},
      {"redlock", "REDLOCK", {"redlock1", "redlock2", "redlock3"}, true, redis_bounds, redis_url},
      {"postgres", "POSTGRES", {"postgres"}, false, postgres_bounds, postgres_session_per_lock_url},
      {"postgres-multiplexed", "POSTGRES", {"postgres"}, false, postgres_bounds, postgres_url},
      {"zookeeper", "ZOOKEEPER", {"zookeeper"}, false, zookeeper_bounds, zookeeper_url},
      {"zookeeper-ensemble", "ZOOKEEPER_ENSEMBLE", {"zk1", "zk2", "zk3"}, true, zookeeper_bounds,
       zookeeper_url},
      {"mariadb", "MARIADB", {"mariadb"}, false, mariadb_bounds, mariadb_url},
      {"etcd", "ETCD", {"etcd"}, false, etcd_bounds, etcd_url},
      {"etcd-cluster", "ETCD_CLUSTER", {"etcd1", "etcd2", "etcd3"}, true, etcd_bounds, etcd_url},
  };
  return backends;
}

}  // namespace

const backend_case& backend() {
  const char* chosen = std::getenv("DLOCK_PARTITION_BACKEND");
  std::string known;
  for (const auto& candidate : all_backends()) {
    if (chosen != nullptr && candidate.name == chosen) return candidate;
    known += " " + candidate.name;
  }
  throw std::runtime_error(std::string("--partition-backend ") + (chosen ? chosen : "(none)") +
                           " is not one of:" + known);
}

}  // namespace partition
