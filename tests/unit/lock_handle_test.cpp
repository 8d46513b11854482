// The empty column of lock_handle's state table (lock_handle.hpp). The held and lost columns
// need a grant: the contract suite states them for every backend (handle_test.cpp).
#include <catch2/catch.hpp>

#include <stdexcept>
#include <utility>

#include <dlock/core/errors.hpp>
#include <dlock/core/lock_handle.hpp>
#include <dlock/core/upgradeable_lock_handle.hpp>

TEST_CASE("every operation on an empty lock_handle does what its state table says", "[unit]") {
  dlock::lock_handle empty;
  CHECK_FALSE(empty);
  CHECK_FALSE(empty.held());
  CHECK(empty.lost());
  CHECK(empty.lost_token().stop_requested());
  CHECK_THROWS_AS(empty.on_lost([] {}), std::logic_error);
  CHECK_THROWS_AS(empty.throw_if_lost(), dlock::lock_lost_error);
  CHECK(empty.fencing_token() == 0);
  CHECK(empty.name().empty());
  CHECK_NOTHROW(empty.release());
  dlock::lock_handle moved_to = std::move(empty);
  CHECK_FALSE(moved_to);
  CHECK_FALSE(empty);  // NOLINT(bugprone-use-after-move): moved from is empty, as the table says
}

TEST_CASE("an empty upgradeable_lock_handle answers as an empty lock_handle", "[unit]") {
  dlock::upgradeable_lock_handle empty;
  CHECK_FALSE(empty);
  CHECK(empty.lost());
  CHECK_THROWS_AS(empty.on_lost([] {}), std::logic_error);
  CHECK_THROWS_AS(empty.throw_if_lost(), dlock::lock_lost_error);
  CHECK(empty.fencing_token() == 0);
}
