// The board's watch on one server and on RedLock's servers (leader_watch_check.hpp).
#include "leader_watch_check.hpp"
#include "redis_test_support.hpp"

namespace {

dlock::redis::options options_for(const std::string& url) {
  dlock::redis::options opts{.key_prefix = redis_test::prefix()};
  for (const auto& server : support::endpoint_hosts(url)) {
    opts.servers.push_back({.host = server.host, .port = static_cast<std::uint16_t>(server.port)});
  }
  return opts;
}

}  // namespace

TEST_CASE("an election's watch hears a proclaim and a resignation from the server, and a "
          "destroyed watch unsubscribes", "[redis][election]") {
  SECTION("one server") {
    const std::string url = redis_test::endpoint();
    redis_test::check_leader_watch_pushed(options_for(url), support::endpoint_hosts(url));
  }
  SECTION("RedLock: every node") {
    const std::string url = redis_test::redlock_endpoint();
    redis_test::check_leader_watch_pushed(options_for(url), support::endpoint_hosts(url));
  }
}
