// Private to dlock::redis: Redis Cluster's key space as a client sees it: the hash slot of a
// key, the slot map that CLUSTER SLOTS answers, and the MOVED and ASK redirections.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reply.hpp"

namespace dlock::redis::detail {

inline constexpr std::uint16_t cluster_slot_count = 16384;

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag, the part between the first '{' and
/// the next '}' when that is not empty, else of the whole key; modulo 16384.
std::uint16_t hash_slot(std::string_view key) noexcept;

/// Slots [first, last] served by the master at host:port.
struct slot_range {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  std::string host;
  std::uint16_t port = 0;
};

/// The masters' ranges in a CLUSTER SLOTS reply; nullopt when it is not shaped like one. An
/// empty host (a node that does not know its own address) is `fallback_host`, the host the
/// reply came from.
std::optional<std::vector<slot_range>> parse_cluster_slots(const reply& answer,
                                                           const std::string& fallback_host);

/// A redirection: "MOVED <slot> <host>:<port>" (the slot lives there now) or "ASK <slot>
/// <host>:<port>" (this one command, after ASKING, goes there: the slot is migrating).
struct redirection {
  bool ask = false;
  std::uint16_t slot = 0;
  std::string host;
  std::uint16_t port = 0;
};

/// The redirection an error reply asks for; nullopt for any other reply.
std::optional<redirection> parse_redirection(const reply& answer);

}  // namespace dlock::redis::detail
