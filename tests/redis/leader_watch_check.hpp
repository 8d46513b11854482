// The Redis backend's pushed election observers, checked the same way on one server, RedLock's
// servers and a Cluster: the board's watch is told of a proclaim and a resignation by the
// servers (core's observer also polls, so the contract's observe cases cannot tell push from
// poll; the board's own callback can), and a destroyed watch leaves no subscription behind.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <dlock/core/backend/election.hpp>
#include <dlock/redis/provider.hpp>

#include "../servers/redis_client.hpp"
#include "backend.hpp"
#include "leader_watch.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace redis_test {

// Subscribers of `channel` on `servers`, plain and shard channels alike.
inline int subscribers(const std::vector<support::host_port>& servers, const std::string& channel) {
  int count = 0;
  for (const auto& server : servers) {
    support::redis_connection redis(server);
    for (const char* verb : {"NUMSUB", "SHARDNUMSUB"}) {
      const auto reply = redis.command_elements({"PUBSUB", verb, channel});
      if (!reply) throw std::runtime_error("PUBSUB " + std::string(verb) + ": " + redis.error());
      count += std::stoi(reply->at(1));
    }
  }
  return count;
}

/// `opts` reach `servers` (a cluster: its masters).
inline void check_leader_watch_pushed(const dlock::redis::options& opts,
                                      const std::vector<support::host_port>& servers) {
  using namespace std::chrono_literals;
  const std::string name = support::unique_name("pushed");
  auto backend = std::make_shared<dlock::redis::detail::redis_backend>(opts);
  const std::shared_ptr<dlock::election_board> board = backend->elections();
  REQUIRE(board);
  dlock::acquire_request request;
  request.kind = dlock::resource_kind::election;
  request.name = name;
  const dlock::redis::detail::key_set keys = backend->keys_for(request);
  const std::vector<std::string> channels{dlock::redis::detail::leader_channel(keys), keys.channel};

  auto told = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<void> watch = board->watch(name, [told] { ++*told; });
  REQUIRE(watch);
  // Each subscription tells once confirmed: two channels on every node.
  const int confirmations = 2 * static_cast<int>(backend->nodes().size());
  REQUIRE(support::wait_until([&] { return *told >= confirmations; }, 5s));

  dlock::redis::provider candidates(opts);
  dlock::leadership lead = candidates.create_election(name).campaign("first", 5s);
  int seen = *told;
  lead.proclaim("second");
  CHECK(support::wait_until([&] { return *told > seen; }, 2s));
  seen = *told;
  lead.resign();
  CHECK(support::wait_until([&] { return *told > seen; }, 2s));

  watch.reset();
  CHECK(support::wait_until(
      [&] { return subscribers(servers, channels[0]) + subscribers(servers, channels[1]) == 0; },
      5s));
}

}  // namespace redis_test
