#include <catch2/catch.hpp>
#include <set>

#include <dlock/core/backend/naming.hpp>

using dlock::naming::escape_segment;

TEST_CASE("escape_segment keeps safe characters and escapes the rest", "[core][naming]") {
  CHECK(escape_segment("job", 200, true) == "job");
  CHECK(escape_segment("nightly-report_v2.1", 200, true) == "nightly-report_v2.1");
  CHECK(escape_segment("a/b c", 200, true) == "a%2Fb%20c");
  CHECK(escape_segment("100%", 200, true) == "100%25");
  CHECK(escape_segment(".hidden", 200, true) == "%2Ehidden");
  CHECK(escape_segment("..", 200, true) == "%2E.");
  CHECK(escape_segment("\xE6\xBC\xA2", 200, true) == "\xE6\xBC\xA2");
  CHECK(escape_segment("\xE6\xBC\xA2", 200, false) == "%E6%BC%A2");
  CHECK(escape_segment("~", 200, true) == "%7E");
}

TEST_CASE("escape_segment is injective on names that differ only in escaping",
          "[core][naming]") {
  const std::vector<std::string> names{"a/b", "a%2Fb", "a%2fb", ".a", "%2Ea", "a.", "a~b",
                                       "a%7Eb", std::string("a\0b", 3), "a%00b"};
  std::set<std::string> keys;
  for (const auto& name : names) keys.insert(escape_segment(name, 200, true));
  CHECK(keys.size() == names.size());
}

TEST_CASE("long names are cut at a character boundary and suffixed with their SHA-1",
          "[core][naming]") {
  const std::string long_name(300, '/');  // 900 bytes escaped
  const std::string key = escape_segment(long_name, 200, true);
  CHECK(key.size() <= 200);
  CHECK(key.find('~') == key.size() - 41);
  CHECK(key.substr(key.size() - 40) == dlock::naming::sha1_hex(long_name));
  CHECK(key.substr(0, 3) == "%2F");
  CHECK((key.size() - 41) % 3 == 0);  // never a partial %XX

  const std::string other = long_name + "/";
  CHECK(escape_segment(other, 200, true) != key);
  // A kept multi-byte character is never split either.
  const std::string wide(100, 'x');
  std::string han;
  for (int i = 0; i < 100; ++i) han += "\xE6\xBC\xA2";
  const std::string cut = escape_segment(wide + han, 200, true);
  CHECK((cut.size() - 41 - 100) % 3 == 0);
}

TEST_CASE("sha1_hex matches the standard test vectors", "[core][naming]") {
  CHECK(dlock::naming::sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(dlock::naming::sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
}

TEST_CASE("validate_name accepts UTF-8 up to 1024 bytes and rejects the rest",
          "[core][naming]") {
  using dlock::naming::validate_name;
  CHECK_NOTHROW(validate_name("x"));
  CHECK_NOTHROW(validate_name(std::string(1024, 'x')));
  CHECK_NOTHROW(validate_name("\xF0\x9F\x94\x92"));
  CHECK_THROWS_WITH(validate_name(""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(validate_name(std::string(1025, 'x')), Catch::Contains("1025 bytes"));
  CHECK_THROWS_WITH(validate_name("\xC0\xAF"), Catch::Contains("UTF-8"));        // overlong
  CHECK_THROWS_WITH(validate_name("\xED\xA0\x80"), Catch::Contains("UTF-8"));    // surrogate
  CHECK_THROWS_WITH(validate_name("ok\xE6\xBC"), Catch::Contains("at byte 2"));  // truncated
}

TEST_CASE("quote_for_message escapes control bytes and shortens long names", "[core][naming]") {
  CHECK(dlock::naming::quote_for_message("a\nb") == "a\\x0Ab");
  CHECK(dlock::naming::quote_for_message(std::string(100, 'x')).size() == 83);
}

TEST_CASE("unescape_segment undoes escape_segment, except for a name cut to its hash",
          "[core][naming]") {
  using dlock::naming::unescape_segment;
  for (const std::string name : {"job", "a/b c", ".hidden", "100%", "\xF0\x9F\x94\x92 lock"}) {
    CHECK(unescape_segment(escape_segment(name, 200, false)) == name);
    CHECK(unescape_segment(escape_segment(name, 200, true)) == name);
  }
  const std::string cut = escape_segment(std::string(300, '/'), 200, false);
  CHECK(unescape_segment(cut) == cut);
}
