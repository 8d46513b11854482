// try_tally: RedLock's vote over one try's answers, and one server's as a vote of one.
#include <chrono>

#include <catch2/catch.hpp>

#include "try_tally.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::redis::detail::acquire_answer;
using dlock::redis::detail::try_tally;
using verdict = try_tally::verdict;
using kind = acquire_answer::kind;

acquire_answer granted(long long token = 0) { return {kind::granted, token, {}}; }
acquire_answer taken(long long ms_left = -1) { return {kind::taken, ms_left, {}}; }
acquire_answer no_reply() { return {.failure = "no reply yet"}; }

}  // namespace

TEST_CASE("try_tally: one server's grant is the verdict and names the fencing token",
          "[redis][unit]") {
  try_tally one(0);
  one.count(granted(42), true);
  CHECK(one.outcome(1, true) == verdict::granted);
  CHECK(one.fencing_token() == 42);
  CHECK(one.may_hold());
}

TEST_CASE("try_tally: RedLock's quorum reached, not reached, and out of reach",
          "[redis][unit]") {
  SECTION("two grants of three make the quorum; the token is the proposal") {
    try_tally t(7);
    t.count(granted(99), true);
    t.count(taken(), true);
    t.count(granted(99), true);
    CHECK(t.outcome(2, true) == verdict::granted);
    CHECK(t.fencing_token() == 7);
  }
  SECTION("a minority of grants is taken, and may hold what must be given back") {
    try_tally t(7);
    t.count(granted(), true);
    t.count(taken(500), true);
    t.count(taken(200), true);
    CHECK(t.outcome(2, true) == verdict::taken);
    CHECK(t.may_hold());
    CHECK(t.wait_hint() == 200ms);
  }
  SECTION("fewer than a quorum answered: unreachable, and the silent ones may hold a grant") {
    try_tally t(7);
    t.count(taken(), true);
    t.count(no_reply(), false);
    t.count(no_reply(), false);
    CHECK(t.outcome(2, true) == verdict::unreachable);
    CHECK(t.may_hold());
    CHECK(t.odd_reply().empty());
  }
  SECTION("a semaphore needs every server") {
    try_tally t(7);
    t.count(granted(), true);
    t.count(granted(), true);
    t.count(taken(), true);
    CHECK(t.outcome(3, true) == verdict::taken);
  }
  SECTION("a quorum of grants past their validity is void") {
    try_tally t(7);
    t.count(granted(), true);
    t.count(granted(), true);
    CHECK(t.outcome(2, false) == verdict::taken);
  }
  SECTION("all taken, all answered: nothing to give back") {
    try_tally t(7);
    t.count(taken(), true);
    t.count(taken(), true);
    CHECK_FALSE(t.may_hold());
    CHECK_FALSE(t.wait_hint());  // no expiry on the holder's lease: no hint
  }
}

TEST_CASE("try_tally: a refusal outranks any grant", "[redis][unit]") {
  SECTION("wrong type") {
    try_tally t(0);
    t.count(granted(), true);
    t.count({kind::wrong_type, 0, "WRONGTYPE Operation against a key"}, true);
    CHECK(t.outcome(1, true) == verdict::wrong_type);
    CHECK(t.wrong_type_reply() == "WRONGTYPE Operation against a key");
  }
  SECTION("another max_count") {
    try_tally t(0);
    t.count({kind::other_max_count, 3, {}}, true);
    CHECK(t.outcome(1, true) == verdict::other_max_count);
    CHECK(t.other_max_count() == 3);
  }
}

TEST_CASE("try_tally: a server's error reply is kept for the failure, and counts as no answer",
          "[redis][unit]") {
  try_tally t(0);
  t.count({.failure = "ERR something odd"}, true);
  CHECK(t.outcome(1, true) == verdict::unreachable);
  CHECK(t.odd_reply() == "ERR something odd");
  CHECK_FALSE(t.may_hold());  // it replied: it granted nothing
}

TEST_CASE("try_tally: outbid by a higher proposal", "[redis][unit]") {
  try_tally t(5);
  t.count({kind::stale, 9, {}}, true);
  t.count({kind::stale, 9, {}}, true);
  CHECK(t.outcome(2, true) == verdict::taken);
  CHECK(t.outbid());
}
