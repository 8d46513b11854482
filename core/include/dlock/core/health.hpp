// dlock/core/health.hpp: what provider::health() reports, for a service's liveness check.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dlock {

/// A provider's health now. A service that holds locks wires ok() into its liveness or
/// readiness check: a provider that is cut off from its server cannot keep what it holds.
struct provider_health {
  /// False while a connection or session the provider keeps is down (ZooKeeper's session,
  /// PostgreSQL sessions whose server has stopped answering the keepalive).
  bool connected = true;
  /// Held leases whose extension is overdue (Redis' watchdog): they are lost when their
  /// validity runs out unconfirmed, if they are not already.
  std::size_t overdue_leases = 0;
  /// One sentence per problem, each "dlock: <scheme> <endpoint>: ...", for a log or the body
  /// of a health endpoint. Empty when healthy.
  std::vector<std::string> problems;

  bool ok() const noexcept { return problems.empty(); }
};

}  // namespace dlock
