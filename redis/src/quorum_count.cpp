// When a fan-out to every server is decided (see quorum_count.hpp).
#include "quorum_count.hpp"

namespace dlock::redis::detail {

bool quorum_count::decides(bool counts, bool replied) {
  if (decided_) return false;
  --pending_;
  counted_ += counts ? 1 : 0;
  replied_ += replied ? 1 : 0;
  const bool out_of_reach = counted_ + pending_ < need_;
  // "Taken" and "unreachable" are different outcomes: when the need is out of reach, the
  // fan-out still waits until it is known whether a quorum replied at all.
  const bool replies_known = replied_ >= need_ || replied_ + pending_ < need_;
  decided_ = counted_ >= need_ || (out_of_reach && replies_known);
  return decided_;
}

}  // namespace dlock::redis::detail
