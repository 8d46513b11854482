// Word of a change of leader, pushed by the board (election_board::watch), stated once for
// every backend whose board pushes: observers then learn of a change without their poll.
#include <catch2/catch.hpp>
#include <atomic>
#include <memory>

#include <dlock/core/backend/election.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

// The calls of one watch's `changed`.
struct pokes {
  std::shared_ptr<std::atomic<int>> count = std::make_shared<std::atomic<int>>(0);
  std::function<void()> counter() const {
    return [count = count] { ++*count; };
  }
  // Whether a call came after `step` began. A watch may also be called once as it starts (a
  // change before it had nothing to see it), so each step of a test waits for a call of its
  // own and no more than one step can pass on that first call.
  template <typename Step>
  bool after(Step step) const {
    const int before = *count;
    step();
    return wait_until([&] { return *count > before; }, 10s);
  }
};

}  // namespace

TEST_CASE("a pushing board tells its watches of every change of leader, and nothing once a "
          "watch ends",
          "[contract][deployment][election][observe]") {
  auto watching = backend().make_provider();
  const std::shared_ptr<dlock::election_board> board = dlock::election_board_of(*watching);
  REQUIRE(board);
  const auto name = unique_name("pushed");
  pokes first;
  std::shared_ptr<void> watch = board->watch(name, first.counter());
  if (!watch) {
    CHECK_FALSE(backend().pushes_leader_changes());
    return;  // the backend does not push: its observers poll
  }
  // Changes made by another provider: nothing of the watching one's own is involved.
  auto campaigning = backend().make_provider();
  dlock::election e = campaigning->create_election(name);
  dlock::leadership lead;
  CHECK(first.after([&] { lead = e.campaign("first", 10s); }));
  CHECK(first.after([&] { lead.proclaim("second"); }));
  CHECK(first.after([&] { lead.resign(); }));

  watch.reset();
  const int after_end = *first.count;
  pokes second;
  std::shared_ptr<void> other = board->watch(name, second.counter());
  REQUIRE(other);
  CHECK(second.after([&] { lead = e.campaign("third", 10s); }));
  CHECK(second.after([&] { lead.resign(); }));
  // The ended watch missed both changes that the live one was told of.
  CHECK(*first.count == after_end);
}
