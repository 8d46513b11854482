// One try's answers, read into a verdict (see try_tally.hpp).
#include "try_tally.hpp"

namespace dlock::redis::detail {

void try_tally::count(const acquire_answer& answer, bool replied) {
  unreplied_ |= !replied;
  if (answer.outcome == acquire_answer::kind::failed) {
    if (replied) odd_reply_ = answer.failure;
    return;
  }
  ++answered_;
  switch (answer.outcome) {
    case acquire_answer::kind::granted:
      ++granted_;
      if (proposal_ == 0) fencing_token_ = static_cast<std::uint64_t>(answer.value);
      break;
    case acquire_answer::kind::wrong_type:
      wrong_type_ = true;
      wrong_type_reply_ = answer.failure;
      break;
    case acquire_answer::kind::other_max_count:
      other_max_count_ = answer.value;
      break;
    case acquire_answer::kind::stale:
      outbid_ = true;
      break;
    case acquire_answer::kind::taken:
      // -1: the holder's lease has no expiry, so it says nothing about when to look again.
      if (answer.value >= 0) {
        const std::chrono::milliseconds hint{answer.value};
        if (!wait_hint_ || hint < *wait_hint_) wait_hint_ = hint;
      }
      break;
    case acquire_answer::kind::failed:
      break;
  }
}

try_tally::verdict try_tally::outcome(std::size_t quorum, bool in_time) const {
  if (wrong_type_) return verdict::wrong_type;
  if (other_max_count_) return verdict::other_max_count;
  if (granted_ >= quorum && in_time) return verdict::granted;
  if (answered_ < quorum) return verdict::unreachable;
  return verdict::taken;
}

std::string_view name_of(try_tally::verdict v) {
  switch (v) {
    case try_tally::verdict::granted: return "granted";
    case try_tally::verdict::taken: return "taken";
    case try_tally::verdict::unreachable: return "unreachable";
    case try_tally::verdict::wrong_type: return "wrong_type";
    case try_tally::verdict::other_max_count: return "other_max_count";
  }
  return "?";
}

}  // namespace dlock::redis::detail
