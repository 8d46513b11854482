// dlock/core/backend/naming.hpp: lock-name validation and the escaping helpers backends share.
//
// A lock name is any non-empty UTF-8 string of at most 1024 bytes. Backends map it to a legal
// key deterministically; docs/naming.md lists each backend's mapping.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::naming {

inline constexpr std::size_t max_name_bytes = 1024;

/// Throws std::invalid_argument naming the problem when `name` is empty, longer than
/// max_name_bytes, or not valid UTF-8 (overlong forms and surrogates included).
void validate_name(std::string_view name);

/// Escapes `name` into one path segment or key of at most `max_bytes` bytes (>= 64).
///
/// Bytes A-Z a-z 0-9 '-' '_' and, when `keep_non_ascii`, the bytes of non-ASCII UTF-8
/// characters are kept; '.' is kept except as the first byte; every other byte becomes %XX
/// (uppercase hex). The mapping is injective. When the result would exceed `max_bytes`, it is
/// cut at a character boundary and ends in '~' and the 40 hex digits of the SHA-1 of the
/// name instead, so distinct long names collide only if their SHA-1 does. '~' never appears
/// in an unhashed result.
/// Requires: `name` valid (validate_name).
std::string escape_segment(std::string_view name, std::size_t max_bytes, bool keep_non_ascii);

/// The name behind an escape_segment() result, for listings that find names by their keys;
/// a result cut to a hash (it holds '~') cannot be undone and is returned as it is.
std::string unescape_segment(std::string_view escaped);

/// The SHA-1 digest of `data` as 40 lowercase hex digits.
std::string sha1_hex(std::string_view data);

/// `name` quoted for messages: control bytes escaped, at most 80 bytes shown.
std::string quote_for_message(std::string_view name);

}  // namespace dlock::naming
