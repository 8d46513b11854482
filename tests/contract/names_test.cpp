// Names (docs/naming.md): any non-empty UTF-8 string up to 1024 bytes, on every backend.
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using contract::backend;
using support::unique_name;

TEST_CASE("any UTF-8 name up to 1024 bytes is a lock name, and distinct names do not collide",
          "[contract][deployment][names]") {
  const std::string base = unique_name("n");
  const std::vector<std::string> names{
      base + "/slash/../dots",
      base + "%2Fslash%2F..%2Fdots",  // the escaped form of the name above, as a name
      base + " spaces and\ttabs\nnewline",
      base + "-\xE6\xBC\xA2\xE5\xAD\x97-\xF0\x9F\x94\x92",  // 漢字 and a padlock emoji
      base + "~tilde",
      base + std::string(1024 - base.size(), 'x'),
      base + std::string(1023 - base.size(), 'x') + "y",
      ".",
      "..",
      std::string("nul\0inside", 10),
  };
  auto holder = backend().make_provider();
  auto other = backend().make_provider();
  std::vector<dlock::lock_handle> held;
  for (const auto& name : names) {
    INFO("name of " << name.size() << " bytes: " << name);
    auto handle = holder->create_lock(name).try_acquire();
    REQUIRE(handle);  // not yet held under any other name of the list: no collision
    CHECK_FALSE(other->create_lock(name).try_acquire());
    held.push_back(std::move(*handle));
  }
}

TEST_CASE("invalid names are invalid_argument naming the problem", "[contract][names]") {
  auto provider = backend().make_provider();
  REQUIRE_THROWS_WITH(provider->create_lock(""), Catch::Contains("must not be empty"));
  REQUIRE_THROWS_WITH(provider->create_lock(std::string(1025, 'a')),
                      Catch::Contains("1025 bytes") && Catch::Contains("1024"));
  REQUIRE_THROWS_WITH(provider->create_lock("bad\xC0\xAFutf8"),
                      Catch::Contains("not valid UTF-8"));
  REQUIRE_THROWS_AS(provider->create_reader_writer_lock(""), std::invalid_argument);
  REQUIRE_THROWS_AS(provider->create_semaphore("", 1), std::invalid_argument);
  REQUIRE_THROWS_WITH(provider->create_semaphore("s", 0), Catch::Contains("max_count"));
}
