// session_grants: the grants of one SQL session, and which resources it holds (sql/).
#include <stop_token>
#include <string>

#include <catch2/catch.hpp>

#include "session_grants.hpp"

namespace {

struct grant {
  std::string resource;
  std::stop_source lost;
};

}  // namespace

TEST_CASE("a session holds a resource while any of its grants of it is booked", "[sql][unit]") {
  dlock::session_grants<grant> grants;
  CHECK(grants.empty());
  CHECK_FALSE(grants.holds("a"));
  grants.emplace(1, {"a", {}});
  grants.emplace(2, {"a", {}});  // a semaphore's two slots on one session
  grants.emplace(3, {"b", {}});
  CHECK(grants.size() == 3);
  CHECK(grants.holds("a"));
  CHECK(grants.holds("b"));
  CHECK_FALSE(grants.holds("c"));
  grants.erase(1);
  CHECK(grants.holds("a"));
  grants.erase(2);
  CHECK_FALSE(grants.holds("a"));
  grants.erase(2);  // released twice: nothing more to forget
  CHECK(grants.holds("b"));
  CHECK(grants.find(3) != grants.end());
  CHECK(grants.find(1) == grants.end());
  grants.erase(3);
  CHECK(grants.empty());
  CHECK_FALSE(grants.holds("b"));
}

TEST_CASE("booking a grant id twice keeps the first and counts it once", "[sql][unit]") {
  dlock::session_grants<grant> grants;
  grants.emplace(7, {"a", {}});
  grants.emplace(7, {"b", {}});
  CHECK(grants.size() == 1);
  CHECK_FALSE(grants.holds("b"));
  grants.erase(7);
  CHECK_FALSE(grants.holds("a"));
}
