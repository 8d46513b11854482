// dlock/postgres/advisory_key.hpp: the PostgreSQL advisory-lock key a lock name maps to.
//
// The mapping is the one of the .NET DistributedLock library (PostgresAdvisoryLockKey), so a
// C++ service and a .NET service that lock the same name on the same database exclude each
// other. docs/postgres.md states it with check vectors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::postgres {

/// An advisory-lock key: one `bigint`, or a pair of `integer`s. PostgreSQL keeps the two forms
/// apart (`pg_advisory_lock(1::bigint)` and `pg_advisory_lock(0, 1)` are different locks), so
/// the form is part of the key.
///
/// From a name (from_name):
/// - at most 9 ASCII characters: packed 7 bits a character, then one 0 bit, then 0x7F for each
///   unused character slot, into 64 bits sent as the pair (high 32 bits, low 32 bits);
/// - exactly 16 hex digits: that `bigint` (two's complement);
/// - `XXXXXXXX,XXXXXXXX` (8 hex digits, a comma, 8 hex digits): that pair of `integer`s;
/// - anything else: the first 8 bytes of the SHA-1 of its UTF-8, read little-endian, as a
///   `bigint` (distinct names may then collide, with probability about n^2 / 2^65).
///
///     advisory_key::from_name("")            == advisory_key(2147483647, -1)
///     advisory_key(42).name()                == "000000000000002a"
///     dlock::postgres::provider::create_lock(advisory_key(42))   // the lock pg_advisory_lock(42)
class advisory_key {
 public:
  /// The `bigint` key `key`.
  explicit advisory_key(std::int64_t key) noexcept : pair_(false), key_(key) {}
  /// The `integer` pair key (`high`, `low`).
  advisory_key(std::int32_t high, std::int32_t low) noexcept
      : pair_(true),
        key_(static_cast<std::int64_t>((static_cast<std::uint64_t>(static_cast<std::uint32_t>(high))
                                        << 32) |
                                       static_cast<std::uint32_t>(low))) {}

  /// The key the lock name `name` maps to (see the class comment). Total: every string maps.
  static advisory_key from_name(std::string_view name);

  /// True for the `integer` pair form.
  bool is_pair() const noexcept { return pair_; }
  /// The `bigint` key. Requires: !is_pair().
  std::int64_t key() const noexcept { return key_; }
  /// The pair's first and second `integer`. Requires: is_pair().
  std::int32_t high() const noexcept {
    return static_cast<std::int32_t>(static_cast<std::uint64_t>(key_) >> 32);
  }
  std::int32_t low() const noexcept {
    return static_cast<std::int32_t>(static_cast<std::uint64_t>(key_) & 0xffffffffu);
  }

  /// A lock name that maps back to exactly this key: 16 lowercase hex digits for a `bigint`,
  /// `xxxxxxxx,xxxxxxxx` for a pair.
  std::string name() const;

  /// The SQL arguments of the advisory functions for this key: `(-5)::bigint` or
  /// `(1)::integer,(2)::integer`.
  std::string sql_arguments() const;

  friend bool operator==(const advisory_key&, const advisory_key&) = default;

 private:
  bool pair_;
  std::int64_t key_;
};

}  // namespace dlock::postgres
