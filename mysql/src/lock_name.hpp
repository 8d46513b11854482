// Private to dlock::mysql: every server-side name dlock uses, from one function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::mysql::detail {

/// What a server-side named lock stands for. A new kind of hold is one more value here and
/// one more line in server_name().
enum class name_space {
  lock,            ///< distributed_lock
  writer_gate,     ///< reader-writer lock: held by the writer, and by a waiting writer
  reader_slot,     ///< reader-writer lock: one of reader_slots, one per reader
  semaphore_slot,  ///< semaphore: one of max_count
  upgrade_gate,    ///< upgradeable reader-writer lock: the one upgradeable reader
  election,        ///< a leader election's lock: held by the leader
};

/// How many readers may hold one reader-writer lock at once (a writer takes every slot).
inline constexpr std::uint32_t reader_slots = 32;
/// The largest semaphore max_count: a waiter's statement names every slot.
inline constexpr std::uint32_t max_semaphore_slots = 256;

/// The server's name of `name` in `space` (slot: the slot's index where the space has slots):
/// "dlock:<tag>:<hash>:<readable>", at most 64 characters, ASCII letters, digits and
/// ":-_." only (so it needs no escaping inside a quoted SQL string). docs/mysql.md.
/// Requires: `name` valid (naming::validate_name).
std::string server_name(name_space space, std::string_view name, std::uint32_t slot = 0);

/// 26 base32 digits (a-z, 2-7) of the first 128 bits of SHA-256(`data`).
std::string name_hash(std::string_view data);

}  // namespace dlock::mysql::detail
