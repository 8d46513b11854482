// dlock/core/inspection.hpp: what provider::inspect() and provider::list_locks() report, and
// the owner string stored with each grant.
//
// "Who holds it, since when, and who is waiting?" Each backend answers what its server can
// see (docs/observability.md, "The inspector"; each backend's page, "What inspect can see");
// what it cannot see stays empty (std::nullopt), never guessed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/errors.hpp>

namespace dlock {

/// How a party holds, or asks for, a name.
enum class party_kind {
  exclusive,       ///< a distributed_lock
  read,            ///< a reader of a distributed_reader_writer_lock
  write,           ///< the writer of a distributed_reader_writer_lock
  semaphore_slot,  ///< one slot of a distributed_semaphore
};

/// "exclusive", "read", "write", "semaphore slot".
std::string_view to_string(party_kind kind) noexcept;

/// One holder of a name, or one waiter for it.
struct lock_party {
  party_kind kind = party_kind::exclusive;
  /// The grant's fencing token (holders), where the backend stores it with the grant.
  std::optional<std::uint64_t> fencing_token;
  /// When the grant was made, or the wait began.
  std::optional<std::chrono::system_clock::time_point> since;
  /// Time left on the grant's lease, for backends whose grants expire unless extended.
  std::optional<std::chrono::nanoseconds> lease_left;
  /// The owner string the grant was made with (provider::set_owner, with_owner()), or what
  /// the backend can tell instead (a process id); empty when the backend cannot tell.
  std::string owner;
};

/// What a backend can see of one name now.
struct lock_inspection {
  std::string name;
  /// The grants now held, oldest first where `since` is known.
  std::vector<lock_party> holders;
  /// The acquires waiting, in the order the backend serves them where it has one.
  std::vector<lock_party> waiters;
  /// False where this backend's waiters leave nothing the server shows (docs/<backend>.md):
  /// an empty `waiters` then does not mean nobody waits.
  bool waiters_visible = true;
  /// The semaphore's max_count, where the name is a semaphore and the backend records it.
  std::optional<std::uint32_t> max_count;

  bool held() const noexcept { return !holders.empty(); }
  /// The earliest `since` of a holder, for listing oldest first.
  std::optional<std::chrono::system_clock::time_point> held_since() const;
};

/// The owner a provider stamps on its grants unless told otherwise:
/// "<host name> pid <pid> <program name>", e.g. "build-7 pid 4711 nightly-import".
std::string default_owner();

/// Throws std::invalid_argument when `owner` cannot be stored by every backend: more than 256
/// bytes, or a control character (a newline would break the file backend's record).
void validate_owner(std::string_view owner);

}  // namespace dlock
