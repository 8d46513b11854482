// Private to dlock::redis: when a fan-out to every server is decided (redlock.hpp's
// quorum_rule): as soon as `need` servers gave an answer that counts, or once so many did not
// that `need` is out of reach and it is known whether `need` servers replied at all, so that
// "taken by a majority" is never reported as "unreachable". A plain object: unit tests feed it
// answers without a server (tests/redis/quorum_count_test.cpp).
#pragma once

#include <cstddef>

namespace dlock::redis::detail {

class quorum_count {
 public:
  quorum_count(std::size_t servers, std::size_t need) : pending_(servers), need_(need) {}

  /// Counts one server's answer: whether it `counts` toward the need, and whether it `replied`
  /// at all (a connection failure did not). Returns true for the answer that decides the
  /// fan-out, once; an answer after it changes nothing.
  bool decides(bool counts, bool replied);
  /// True once an answer decided the fan-out.
  bool decided() const { return decided_; }

 private:
  std::size_t pending_;
  std::size_t need_;
  std::size_t counted_ = 0;
  std::size_t replied_ = 0;
  bool decided_ = false;
};

}  // namespace dlock::redis::detail
