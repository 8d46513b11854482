// The owner string's default and checks, and inspection's small helpers (inspection.hpp).
#include <dlock/core/inspection.hpp>

#include <errno.h>
#include <unistd.h>

#include <algorithm>

#include <dlock/core/backend/naming.hpp>

namespace dlock {

namespace {

constexpr std::size_t max_owner_bytes = 256;

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

}  // namespace

std::string_view to_string(party_kind kind) noexcept {
  switch (kind) {
    case party_kind::exclusive: return "exclusive";
    case party_kind::read: return "read";
    case party_kind::write: return "write";
    case party_kind::semaphore_slot: return "semaphore slot";
  }
  return "exclusive";
}

std::optional<std::chrono::system_clock::time_point> lock_inspection::held_since() const {
  std::optional<std::chrono::system_clock::time_point> earliest;
  for (const lock_party& holder : holders) {
    if (holder.since && (!earliest || *holder.since < *earliest)) earliest = holder.since;
  }
  return earliest;
}

std::string default_owner() {
  std::string owner = host_name() + " pid " + std::to_string(::getpid()) + " " +
                      program_invocation_short_name;
  // A host or program name could carry what validate_owner() rejects; never fail for it.
  std::replace_if(owner.begin(), owner.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, '?');
  if (owner.size() > max_owner_bytes) owner.resize(max_owner_bytes);
  return owner;
}

void validate_owner(std::string_view owner) {
  if (owner.size() > max_owner_bytes) {
    throw std::invalid_argument("dlock: owner '" + naming::quote_for_message(owner) + "' has " +
                                std::to_string(owner.size()) + " bytes; at most " +
                                std::to_string(max_owner_bytes) + " are stored");
  }
  for (char c : owner) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      throw std::invalid_argument("dlock: owner '" + naming::quote_for_message(owner) +
                                  "' contains a control character");
    }
  }
}

}  // namespace dlock
