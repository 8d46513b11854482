// Backends that live outside this process: an endpoint that cannot be reached.
#include <catch2/catch.hpp>

#include "backend.hpp"

using contract::backend;

TEST_CASE("an unreachable backend is a connection_error naming the endpoint",
          "[contract][deployment][errors]") {
  REQUIRE_THROWS_AS(backend().acquire_from_unreachable_endpoint(), dlock::connection_error);
  REQUIRE_THROWS_WITH(backend().acquire_from_unreachable_endpoint(),
                      Catch::Contains(backend().unreachable_endpoint()));
}
