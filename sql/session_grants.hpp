// Private to the SQL backends (dlock::postgres and dlock::mysql): the grants booked on one SQL
// session, by id and by resource.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace dlock {

/// The grants of one session by grant id, with a count of each resource beside them, so that
/// "does this session hold `resource`?" (asked at every attempt, to keep a re-entrant server
/// lock from being granted twice on one session) costs one hash lookup, not a scan of every
/// grant. `Grant` has a `std::string resource`. Read-only iteration: a grant's resource never
/// changes while it is booked.
template <typename Grant>
class session_grants {
 public:
  using map_type = std::map<std::uint64_t, Grant>;
  using const_iterator = typename map_type::const_iterator;

  void emplace(std::uint64_t id, Grant grant) {
    const std::string resource = grant.resource;
    if (grants_.emplace(id, std::move(grant)).second) ++held_[resource];
  }

  void erase(std::uint64_t id) {
    auto grant = grants_.find(id);
    if (grant == grants_.end()) return;
    auto count = held_.find(grant->second.resource);
    if (--count->second == 0) held_.erase(count);
    grants_.erase(grant);
  }

  bool holds(const std::string& resource) const { return held_.contains(resource); }

  const_iterator find(std::uint64_t id) const { return grants_.find(id); }
  const_iterator begin() const noexcept { return grants_.begin(); }
  const_iterator end() const noexcept { return grants_.end(); }
  std::size_t size() const noexcept { return grants_.size(); }
  bool empty() const noexcept { return grants_.empty(); }

 private:
  map_type grants_;
  std::unordered_map<std::string, std::size_t> held_;  // resource -> grants of it
};

}  // namespace dlock
