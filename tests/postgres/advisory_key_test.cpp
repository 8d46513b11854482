// The name-to-key mapping of dlock::postgres, checked against the .NET DistributedLock
// library's vectors (docs/postgres.md).
#include <catch2/catch.hpp>

#include <dlock/postgres/advisory_key.hpp>

using dlock::postgres::advisory_key;

namespace {

std::string repeated(const std::string& character, int times) {
  std::string text;
  for (int i = 0; i < times; ++i) text += character;
  return text;
}

}  // namespace

TEST_CASE("the empty name packs into the pair (2147483647, -1)", "[postgres][key]") {
  const auto key = advisory_key::from_name("");
  CHECK(key.is_pair());
  CHECK(key.high() == 2147483647);
  CHECK(key.low() == -1);
}

TEST_CASE("eighteen U+6F22 characters hash to the int8 -5707277204051710361", "[postgres][key]") {
  const auto key = advisory_key::from_name(repeated("\xe6\xbc\xa2", 18));
  CHECK_FALSE(key.is_pair());
  CHECK(key.key() == -5707277204051710361LL);
}

TEST_CASE("up to nine ASCII characters pack 7 bits each, a 0 bit, then 0x7F padding",
          "[postgres][key]") {
  // "a" = 0x61: 1100001, then 0, then eight 1111111.
  const std::uint64_t packed = (((0x61ull << 1) << 56) | ((1ull << 56) - 1));
  const auto a = advisory_key::from_name("a");
  CHECK(a.is_pair());
  CHECK(static_cast<std::uint32_t>(a.high()) == static_cast<std::uint32_t>(packed >> 32));
  CHECK(static_cast<std::uint32_t>(a.low()) == static_cast<std::uint32_t>(packed));
  const auto nine = advisory_key::from_name("123456789");
  CHECK(nine.is_pair());
  const auto ten = advisory_key::from_name("1234567890");
  CHECK_FALSE(ten.is_pair());  // hashed
  CHECK(advisory_key::from_name("caf\xc3\xa9").is_pair() == false);  // not ASCII: hashed
}

TEST_CASE("sixteen hex digits are that int8 key, either case", "[postgres][key]") {
  CHECK(advisory_key::from_name("000000000000002a") == advisory_key(42));
  CHECK(advisory_key::from_name("FFFFFFFFFFFFFFFF") == advisory_key(-1));
  CHECK(advisory_key::from_name("8000000000000000") ==
        advisory_key(std::numeric_limits<std::int64_t>::min()));
  CHECK_FALSE(advisory_key::from_name("00000000000000g0").is_pair());
  CHECK_FALSE(advisory_key::from_name("00000000000000g0") == advisory_key(0));
}

TEST_CASE("XXXXXXXX,XXXXXXXX is that int4 pair", "[postgres][key]") {
  CHECK(advisory_key::from_name("00000001,ffffffff") == advisory_key(1, -1));
  CHECK(advisory_key::from_name("7FFFFFFF,80000000") ==
        advisory_key(2147483647, std::numeric_limits<std::int32_t>::min()));
  const auto not_hex = advisory_key::from_name("0000000x,00000000");
  CHECK_FALSE(not_hex.is_pair());
}

TEST_CASE("an explicit key's name maps back to the key", "[postgres][key]") {
  for (const auto& key : {advisory_key(0), advisory_key(-5707277204051710361LL), advisory_key(1, 2),
                          advisory_key(-1, -2147483647 - 1)}) {
    CHECK(advisory_key::from_name(key.name()) == key);
  }
  CHECK(advisory_key(42).name() == "000000000000002a");
  CHECK(advisory_key(1, -1).name() == "00000001,ffffffff");
  CHECK(advisory_key(-5).sql_arguments() == "(-5)::bigint");
  CHECK(advisory_key(1, 2).sql_arguments() == "(1)::integer,(2)::integer");
}
