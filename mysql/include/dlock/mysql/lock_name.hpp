// dlock/mysql/lock_name.hpp: where a dlock name lands among the server's named locks.
//
// docs/mysql.md states the mapping; this function is it, so that a service or a test can take
// the same lock with plain SQL (`SELECT GET_LOCK('<server_lock_name("job")>', 10)`).
#pragma once

#include <string>
#include <string_view>

namespace dlock::mysql {

/// The server-side name of the exclusive lock `name` (dlock::distributed_lock):
/// `dlock:L:` + 26 base32 digits (lowercase a-z, 2-7) of the first 128 bits of the SHA-256 of
/// the name's exact bytes + `:` + the name's first bytes that are ASCII letters, digits, '-',
/// '_' or '.' (others become '_'), cut so that the whole is at most 64 characters.
///
/// The hash keeps names apart that the server would confuse: MySQL compares lock names
/// case-insensitively and refuses names over 64 characters, so "A" and "a" get different
/// hashes and any name fits. The readable tail is for people reading SHOW PROCESSLIST only.
/// Throws: std::invalid_argument for an invalid name (empty, over 1024 bytes, not UTF-8).
std::string server_lock_name(std::string_view name);

}  // namespace dlock::mysql
