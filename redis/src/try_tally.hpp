// Private to dlock::redis: what one try's answers from its servers amount to. One server is a
// vote of one; RedLock's servers each answer the acquire script and a quorum decides
// (node_set::quorum). Fed one answer per server, it names the try's verdict for the acquire's
// cycle (acquire_machine.hpp) and keeps what the verdict's report needs. A plain object: unit
// tests feed it answers without a server (tests/redis/try_tally_test.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "acquire_answer.hpp"

namespace dlock::redis::detail {

class try_tally {
 public:
  /// `proposal`: RedLock's fencing proposal (the token a grant gets); 0 on one server, whose
  /// grant answers its own token.
  explicit try_tally(std::uint64_t proposal) : fencing_token_(proposal), proposal_(proposal) {}

  /// Counts one server's answer. `replied` is false when no reply came (a connection failure,
  /// or a silent server the fan-out settled without): such a server may still grant it.
  void count(const acquire_answer& answer, bool replied);

  enum class verdict {
    granted,          ///< a quorum granted, in time to be valid
    taken,            ///< a quorum answered, and not a quorum of grants in time
    unreachable,      ///< fewer than a quorum answered at all
    wrong_type,       ///< a server holds another type under the name's keys
    other_max_count,  ///< a server's semaphore was made with another max_count
  };
  /// The verdict when `quorum` grants are needed; `in_time` is false once a grant would already
  /// be past its validity (redlock.hpp: valid_until). A wrong type or max_count outranks grants.
  verdict outcome(std::size_t quorum, bool in_time) const;

  /// True when a server may hold a grant of this try: one granted, or one did not reply.
  bool may_hold() const { return granted_ > 0 || unreplied_; }
  std::uint64_t fencing_token() const { return fencing_token_; }
  /// The shortest time a taking holder's lease has left; none when no server said.
  std::optional<std::chrono::milliseconds> wait_hint() const { return wait_hint_; }
  /// Another contender's higher proposal got to a server first (RedLock's fencing).
  bool outbid() const { return outbid_; }
  /// The server's WRONGTYPE reply, for verdict::wrong_type.
  const std::string& wrong_type_reply() const { return wrong_type_reply_; }
  /// The max_count a server stores, for verdict::other_max_count.
  long long other_max_count() const { return other_max_count_.value_or(0); }
  /// A reply that was neither an answer nor a connection failure (a server's error), if any.
  const std::string& odd_reply() const { return odd_reply_; }

 private:
  std::uint64_t fencing_token_;
  std::uint64_t proposal_;
  std::size_t granted_ = 0;
  std::size_t answered_ = 0;
  bool unreplied_ = false;
  bool outbid_ = false;
  bool wrong_type_ = false;
  std::optional<std::chrono::milliseconds> wait_hint_;
  std::optional<long long> other_max_count_;
  std::string wrong_type_reply_;
  std::string odd_reply_;
};

std::string_view name_of(try_tally::verdict v);

}  // namespace dlock::redis::detail
