// The resource a nemesis run's critical sections work on: a counter in a file that checks
// fencing tokens on every read and write, as a storage service that honours fencing would
// (Kleppmann's "How to do distributed locking"). Several processes share it; flock(2) makes
// each step atomic.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace support {

/// A fenced counter. A step with a token lower than the highest token the store has seen is
/// refused; any other step raises that highest token to its own. So a paused holder whose
/// lease expired is refused once a newer holder has touched the store, and an increment is
/// never lost as long as tokens rise with every grant.
class fenced_store {
 public:
  /// Opens (creating) the store file at `path`.
  explicit fenced_store(std::filesystem::path path);

  /// Reads the counter with `token`; nullopt when the token is stale.
  std::optional<std::int64_t> read(std::uint64_t token) const;
  /// Reads the counter with `token` without raising the highest token: a reader's step, so
  /// that readers holding at once never fence out one another. nullopt when the token is stale
  /// (a writer with a newer grant has been here).
  std::optional<std::int64_t> read_shared(std::uint64_t token) const;
  /// Stores `value` with `token`; false when the token is stale. An accepted write is also
  /// appended to journal_path() ("<token> <value>"), in the same atomic step, so the journal
  /// is the store's own record even of a writer killed before it could log its section.
  bool write(std::uint64_t token, std::int64_t value) const;

  std::filesystem::path journal_path() const;

 private:
  std::filesystem::path path_;
};

}  // namespace support
