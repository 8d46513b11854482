// The board's watch through Sentinel: on the master the sentinels name (leader_watch_check.hpp).
#include "leader_watch_check.hpp"

TEST_CASE("an election's watch hears a proclaim and a resignation from the master the "
          "sentinels name, and a destroyed watch unsubscribes", "[redis][sentinel][election]") {
  const std::string url = support::require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL");
  const auto path = url.find('/', url.find("://") + 3);
  dlock::redis::options opts{.key_prefix = support::unique_name("sentinel-election") + ":"};
  opts.sentinel.master_name = url.substr(path + 1, url.find('?', path) - path - 1);
  for (const auto& sentinel : support::endpoint_hosts(url)) {
    opts.sentinel.sentinels.push_back(
        {.host = sentinel.host, .port = static_cast<std::uint16_t>(sentinel.port)});
  }
  redis_test::check_leader_watch_pushed(
      opts,
      support::endpoint_hosts(support::require_test_server_endpoint("DLOCK_TEST_REDIS_SENTINEL_NODES")));
}
