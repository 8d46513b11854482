#include <dlock/postgres/advisory_key.hpp>

#include <cstdio>
#include <optional>

#include <dlock/core/backend/naming.hpp>

namespace dlock::postgres {

namespace {

constexpr std::size_t max_ascii_length = 9;
constexpr unsigned ascii_char_bits = 7;
constexpr std::uint64_t max_ascii_value = (1u << ascii_char_bits) - 1;

// DistributedLock's TryEncodeAscii: left to right, 7 bits each, a 0 bit, then 0x7F padding.
std::optional<std::uint64_t> encode_ascii(std::string_view name) {
  if (name.size() > max_ascii_length) return std::nullopt;
  std::uint64_t packed = 0;
  for (unsigned char c : name) {
    if (c > max_ascii_value) return std::nullopt;
    packed = (packed << ascii_char_bits) | c;
  }
  packed <<= 1;
  for (std::size_t i = name.size(); i < max_ascii_length; ++i) {
    packed = (packed << ascii_char_bits) | max_ascii_value;
  }
  return packed;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// .NET's NumberStyles.AllowHexSpecifier: hex digits only, no sign, no spaces.
std::optional<std::uint64_t> parse_hex(std::string_view digits) {
  std::uint64_t value = 0;
  for (char c : digits) {
    const int digit = hex_digit(c);
    if (digit < 0) return std::nullopt;
    value = (value << 4) | static_cast<std::uint64_t>(digit);
  }
  return value;
}

std::int64_t hash_name(std::string_view name) {
  const std::string digest = naming::sha1_hex(name);
  std::uint64_t little_endian = 0;
  for (int byte = 7; byte >= 0; --byte) {
    little_endian = (little_endian << 8) |
                    static_cast<std::uint64_t>(hex_digit(digest[2 * byte]) * 16 +
                                               hex_digit(digest[2 * byte + 1]));
  }
  return static_cast<std::int64_t>(little_endian);
}

std::int32_t as_int32(std::uint64_t value) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(value));
}

}  // namespace

advisory_key advisory_key::from_name(std::string_view name) {
  if (auto packed = encode_ascii(name)) {
    return advisory_key(as_int32(*packed >> 32), as_int32(*packed));
  }
  if (name.size() == 16) {
    if (auto value = parse_hex(name)) return advisory_key(static_cast<std::int64_t>(*value));
  }
  if (name.size() == 17 && name[8] == ',') {
    auto high = parse_hex(name.substr(0, 8));
    auto low = parse_hex(name.substr(9));
    if (high && low) return advisory_key(as_int32(*high), as_int32(*low));
  }
  // A thread that takes one lock again and again hashes its name once: SHA-1 cost about as
  // much as the rest of the client's own work per acquire (docs/benchmarks.md, PostgreSQL).
  thread_local std::string last_name;
  thread_local std::int64_t last_hash = 0;
  if (last_name.empty() || name != last_name) {
    last_hash = hash_name(name);
    last_name.assign(name);
  }
  return advisory_key(last_hash);
}

std::string advisory_key::name() const {
  char text[24];
  if (pair_) {
    std::snprintf(text, sizeof text, "%08x,%08x", static_cast<std::uint32_t>(high()),
                  static_cast<std::uint32_t>(low()));
  } else {
    std::snprintf(text, sizeof text, "%016llx",
                  static_cast<unsigned long long>(static_cast<std::uint64_t>(key_)));
  }
  return text;
}

std::string advisory_key::sql_arguments() const {
  if (pair_) {
    return "(" + std::to_string(high()) + ")::integer,(" + std::to_string(low()) + ")::integer";
  }
  return "(" + std::to_string(key_) + ")::bigint";
}

}  // namespace dlock::postgres
