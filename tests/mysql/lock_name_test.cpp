// The name mapping of dlock::mysql (docs/mysql.md): pure, so tested without a server.
#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include <dlock/mysql/lock_name.hpp>

#include "lock_name.hpp"  // mysql/src

using dlock::mysql::server_lock_name;
using dlock::mysql::detail::name_space;
using dlock::mysql::detail::server_name;

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool legal(const std::string& mapped) {
  return mapped.size() <= 64 &&
         mapped.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789:-_.") == std::string::npos;
}

}  // namespace

TEST_CASE("a lock name maps to dlock:L:, a 26-digit hash and the readable start of the name",
          "[mysql][naming]") {
  const auto mapped = server_lock_name("nightly-report");
  CHECK(mapped.starts_with("dlock:L:"));
  CHECK(mapped.ends_with(":nightly-report"));
  CHECK(mapped.size() == 8 + 26 + 1 + 14);
  CHECK(server_lock_name("nightly-report") == mapped);  // deterministic
}

TEST_CASE("names that differ only in case stay apart on a server that ignores case",
          "[mysql][naming]") {
  CHECK(lower(server_lock_name("A")) != lower(server_lock_name("a")));
  CHECK(lower(server_lock_name("Job")) != lower(server_lock_name("JOB")));
}

TEST_CASE("every name fits 64 characters of letters, digits and :-_.", "[mysql][naming]") {
  const std::string long_name(1024, 'x');
  const std::string utf8 = "r\xc3\xa9sum\xc3\xa9 / \xe6\x97\xa5\xe6\x9c\xac 'quoted' \"x\"; --";
  for (const std::string& name : {std::string("a"), long_name, utf8, std::string("a b\tc")}) {
    INFO(name);
    CHECK(legal(server_lock_name(name)));
  }
  // Long names that share their first 64 bytes still differ (by the hash).
  CHECK(server_lock_name(long_name) != server_lock_name(long_name.substr(1) + "y"));
}

TEST_CASE("every kind of hold has a name space of its own", "[mysql][naming]") {
  std::set<std::string> names{
      server_name(name_space::lock, "x"),           server_name(name_space::writer_gate, "x"),
      server_name(name_space::reader_slot, "x", 0), server_name(name_space::reader_slot, "x", 1),
      server_name(name_space::semaphore_slot, "x", 0), server_name(name_space::upgrade_gate, "x")};
  CHECK(names.size() == 6);
  for (const auto& name : names) CHECK(legal(name));
  CHECK(server_name(name_space::semaphore_slot, std::string(1024, 'y'), 255).size() == 64);
}

TEST_CASE("an invalid name is invalid_argument", "[mysql][naming]") {
  CHECK_THROWS_AS(server_lock_name(""), std::invalid_argument);
  CHECK_THROWS_AS(server_lock_name("\xff"), std::invalid_argument);
}
