// quorum_count: when a fan-out to every server is decided, without a server.
#include <catch2/catch.hpp>

#include "quorum_count.hpp"

using dlock::redis::detail::quorum_count;

namespace {

constexpr bool counts = true, refuses = false;
constexpr bool replied = true, silent = false;

}  // namespace

TEST_CASE("quorum_count: a majority that counts decides without the last server",
          "[redis][unit]") {
  quorum_count three(3, 2);
  CHECK_FALSE(three.decides(counts, replied));
  CHECK(three.decides(counts, replied));
  CHECK(three.decided());
  CHECK_FALSE(three.decides(counts, replied));  // decided once
}

TEST_CASE("quorum_count: a majority of refusals decides as soon as the need is out of reach",
          "[redis][unit]") {
  quorum_count three(3, 2);
  CHECK_FALSE(three.decides(refuses, replied));
  CHECK(three.decides(refuses, replied));
}

TEST_CASE("quorum_count: a refusal and a failure wait for the third server, to tell taken from "
          "unreachable",
          "[redis][unit]") {
  SECTION("the third replies: taken by a majority") {
    quorum_count three(3, 2);
    CHECK_FALSE(three.decides(refuses, replied));
    CHECK_FALSE(three.decides(refuses, silent));
    CHECK(three.decides(refuses, replied));
  }
  SECTION("the third fails too: unreachable") {
    quorum_count three(3, 2);
    CHECK_FALSE(three.decides(refuses, silent));
    CHECK(three.decides(refuses, silent));
  }
}

TEST_CASE("quorum_count: a semaphore's need of every server is out of reach at the first refusal",
          "[redis][unit]") {
  quorum_count three(3, 3);
  CHECK_FALSE(three.decides(counts, replied));
  // Out of reach, and two replies of three needed are not yet known either way.
  CHECK_FALSE(three.decides(refuses, replied));
  CHECK(three.decides(counts, replied));
}

TEST_CASE("quorum_count: one server decides with its one answer", "[redis][unit]") {
  for (const bool answer_counts : {counts, refuses}) {
    for (const bool answer_replied : {replied, silent}) {
      quorum_count one(1, 1);
      CHECK(one.decides(answer_counts, answer_replied));
    }
  }
}
