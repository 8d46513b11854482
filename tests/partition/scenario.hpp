// The partition scenarios' view of a backend: its URLs over each path, the servers that make up
// a full partition, a member for the one-member cases, and the bounds its docs promise. One
// scenario program runs against each backend, picked with --partition-backend NAME
// (backends.cpp lists them).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dlock/core.hpp>

#include "partition_servers.hpp"

namespace partition {

using namespace std::chrono_literals;

/// What the backend's documentation promises under a partition, with the options its URL sets.
struct bounds {
  /// A held handle whose servers are cut off is marked lost within this.
  std::chrono::milliseconds lost;
  /// A waiting acquire whose servers are cut off fails with connection_error within this.
  std::chrono::milliseconds waiter_fails;
  /// After a heal (or after a holder was cut off and marked lost), another client is granted
  /// the name within this.
  std::chrono::milliseconds granted_after;
  /// With one member of a quorum cut off, a grant on the rest takes at most this.
  std::chrono::milliseconds grant_with_member_cut;
};

struct backend_case {
  std::string name;                 ///< "redis", "redlock", "postgres", ...
  std::string variable;             ///< its endpoint: DLOCK_PARTITION_<variable>_<A|B>
  std::vector<std::string> servers; ///< cutting path A to all of these cuts the client off
  bool quorum = false;              ///< one member can be cut while the rest serve
  bounds promised;
  /// The URL over `path`, with the options the bounds assume; `scope` keeps the names of
  /// one test apart from another's (a key prefix or base path).
  std::string (*url)(const std::string& endpoint, const std::string& scope);
};

/// The backend this program runs against ($DLOCK_PARTITION_BACKEND, set from
/// --partition-backend). Throws std::runtime_error naming the known ones otherwise.
const backend_case& backend();

}  // namespace partition
