#include <catch2/catch.hpp>

#include <dlock/dlock.hpp>

#include "support.hpp"

using dlock::provider_url;

TEST_CASE("provider URLs parse into scheme, credentials, hosts, path and options",
          "[core][url]") {
  auto url = provider_url::parse("Redis://user:p%40ss@h1:6379,h2,[::1]:7000/0?expiry=30s&x=%20");
  CHECK(url.scheme == "redis");
  CHECK(url.user == "user");
  CHECK(url.password == "p@ss");
  REQUIRE(url.hosts.size() == 3);
  CHECK(url.hosts[0].host == "h1");
  CHECK(url.hosts[0].port == 6379);
  CHECK_FALSE(url.hosts[1].port);
  CHECK(url.hosts[2].host == "::1");
  CHECK(url.hosts[2].port == 7000);
  CHECK(url.path == "/0");
  CHECK(url.options.at("expiry") == "30s");
  CHECK(url.options.at("x") == " ");
  CHECK(url.redacted() == "redis://user:***@h1:6379,h2,[::1]:7000/0?expiry=30s&x= ");

  auto file = provider_url::parse("file:///var/lock/my%20app");
  CHECK(file.hosts.empty());
  CHECK(file.path == "/var/lock/my app");
}

TEST_CASE("malformed URLs are invalid_argument naming the fault, never the password",
          "[core][url]") {
  CHECK_THROWS_WITH(provider_url::parse("localhost:6379"), Catch::Contains("scheme://"));
  CHECK_THROWS_WITH(provider_url::parse("redis://u:secret@h:99999"),
                    Catch::Contains("port '99999'") && !Catch::Contains("secret"));
  CHECK_THROWS_WITH(provider_url::parse("redis://u:secret@h:1?a=1&a=2"),
                    Catch::Contains("'a' given twice") && !Catch::Contains("secret"));
  CHECK_THROWS_WITH(provider_url::parse("redis://h1,,h2"), Catch::Contains("empty host"));
  CHECK_THROWS_WITH(provider_url::parse("file:///x?flag"), Catch::Contains("key=value"));
  CHECK_THROWS_WITH(provider_url::parse("file:///x%2"), Catch::Contains("%-escape"));
}

TEST_CASE("durations need a unit", "[core][url]") {
  using namespace std::chrono_literals;
  CHECK(dlock::parse_duration("expiry", "30s") == 30s);
  CHECK(dlock::parse_duration("expiry", "250ms") == 250ms);
  CHECK(dlock::parse_duration("expiry", "1.5s") == 1500ms);
  CHECK(dlock::parse_duration("expiry", "2m") == 120s);
  CHECK(dlock::parse_duration("expiry", "500us") == 500us);
  CHECK_THROWS_WITH(dlock::parse_duration("expiry", "30"),
                    Catch::Contains("'expiry'") && Catch::Contains("unit"));
  CHECK_THROWS_WITH(dlock::parse_duration("expiry", "-1s"), Catch::Contains("'expiry'"));
  CHECK_THROWS_WITH(dlock::parse_bool("remove_files", "maybe"), Catch::Contains("remove_files"));
}

TEST_CASE("make_provider rejects unknown schemes and options by name", "[core][url]") {
  CHECK_THROWS_WITH(dlock::make_provider("nosuch://x"),
                    Catch::Contains("unknown provider URL scheme 'nosuch'") &&
                        Catch::Contains("file://"));
  CHECK_THROWS_WITH(dlock::make_provider("file:///tmp/dlock-url-test?colour=blue"),
                    Catch::Contains("unknown option 'colour'"));
  CHECK_THROWS_WITH(dlock::make_provider("file://otherhost/tmp/x"), Catch::Contains("names a host"));
  CHECK_THROWS_WITH(dlock::make_provider("file://"), Catch::Contains("needs a directory"));
}

TEST_CASE("max_hold in any provider URL sets the provider's default maximum hold time",
          "[core][url][max_hold]") {
  auto provider = dlock::make_provider("memory:///url-max-hold?max_hold=50ms");
  auto held = provider->create_lock("job").acquire(std::chrono::seconds(10));
  CHECK(support::wait_until([&] { return held.lost(); }, std::chrono::seconds(30)));
  CHECK_THROWS_WITH(dlock::make_provider("memory:///x?max_hold=soon"), Catch::Contains("max_hold"));
}

TEST_CASE("min_hold in a provider URL sets the default minimum hold, or is refused by name",
          "[core][url][min_hold]") {
  CHECK_NOTHROW(dlock::make_provider("memory:///url-min-hold?min_hold=2s"));
  CHECK_THROWS_WITH(dlock::make_provider("memory:///x?min_hold=soon"), Catch::Contains("min_hold"));
  CHECK_THROWS_WITH(dlock::make_provider("memory:///x?min_hold=-1s"), Catch::Contains("min_hold"));
}

TEST_CASE("memory URLs take a domain and nothing else", "[core][url][memory]") {
  CHECK(dlock::make_provider("memory://")->endpoint() == "(default domain)");
  CHECK(dlock::make_provider("memory:///tests")->endpoint() == "tests");
  CHECK_THROWS_WITH(dlock::make_provider("memory://somehost/x"),
                    Catch::Contains("must not name a host"));
  CHECK_THROWS_WITH(dlock::make_provider("memory:///x?colour=blue"), Catch::Contains("colour"));
}
