// dlock::resource_kind: each primitive a user creates is held as the resource of its name.
#include <catch2/catch.hpp>

#include <dlock/core/backend/resource_kind.hpp>

TEST_CASE("each primitive is held as the resource of the same name, at compile time",
          "[core]") {
  using dlock::primitive;
  using dlock::resource_kind;
  STATIC_REQUIRE(dlock::to_resource_kind(primitive::lock) == resource_kind::lock);
  STATIC_REQUIRE(dlock::to_resource_kind(primitive::reader_writer_lock) ==
                 resource_kind::reader_writer_lock);
  STATIC_REQUIRE(dlock::to_resource_kind(primitive::semaphore) == resource_kind::semaphore);
}
