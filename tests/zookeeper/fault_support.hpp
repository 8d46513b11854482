// What the ZooKeeper fault tests share: the test servers' URLs, a provider with a given session
// timeout, and a node's children as the standalone server has them. Inline, as the fault tests'
// sources are compiled together (a unity build) and each once on its own (the timing label).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <dlock/dlock.hpp>

#include "test_servers.hpp"
#include "zookeeper_client.hpp"

namespace zookeeper_fault {

inline std::string standalone_url() {
  return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER");
}

inline std::string ensemble_url() {
  return support::require_test_server_endpoint("DLOCK_TEST_ZOOKEEPER_ENSEMBLE");
}

inline std::shared_ptr<dlock::zookeeper::provider> make_zookeeper(
    const std::string& url, const std::string& base, std::chrono::milliseconds session) {
  return std::make_shared<dlock::zookeeper::provider>(dlock::zookeeper::options{
      .hosts = support::zookeeper_hosts(url), .base_path = base, .session_timeout = session});
}

/// The number of children of `parent` on the standalone server, read in a fresh session.
inline std::size_t child_count(const std::string& parent) {
  return support::zookeeper_session(support::zookeeper_hosts(standalone_url()))
      .children(parent)
      .size();
}

}  // namespace zookeeper_fault
