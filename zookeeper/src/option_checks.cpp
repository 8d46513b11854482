#include "option_checks.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dlock::zookeeper::detail {

namespace {

[[noreturn]] void reject(std::string_view what) {
  throw std::invalid_argument("dlock: zookeeper provider: option " + std::string(what));
}

void validate_absolute_path(std::string_view field, const std::string& path, bool allow_empty) {
  if (path.empty() && allow_empty) return;
  const bool bad = path.empty() || path.front() != '/' || path == "/" || path.back() == '/' ||
                   path.find("//") != std::string::npos || path.find('\0') != std::string::npos;
  if (bad) {
    reject("'" + std::string(field) + "' must be an absolute node path like /locks (not '/', no "
           "trailing '/'), not '" + path + "'");
  }
}

// The C client takes session and connect timeouts as an int of milliseconds.
void validate_milliseconds(std::string_view field, std::chrono::nanoseconds value) {
  if (value < std::chrono::milliseconds(1) ||
      value > std::chrono::milliseconds(std::numeric_limits<std::int32_t>::max())) {
    reject("'" + std::string(field) +
           "' must be at least 1ms and fit in 32 bits of milliseconds");
  }
}

void append(std::vector<ACL>& entries, const ACL_vector& acl) {
  entries.insert(entries.end(), acl.data, acl.data + acl.count);
}

}  // namespace

void validate(const options& opts) {
  if (opts.hosts.empty()) reject("'hosts' must not be empty");
  validate_absolute_path("base_path", opts.base_path, false);
  validate_absolute_path("chroot", opts.chroot, true);
  validate_milliseconds("session_timeout", opts.session_timeout);
  validate_milliseconds("connect_timeout", opts.connect_timeout);
  if (opts.release_timeout <= std::chrono::nanoseconds::zero()) {
    reject("'release_timeout' must be positive");
  }
  if (opts.acl != acl_policy::open && opts.user.empty()) {
    reject("'acl' other than open needs a user and password");
  }
  if (opts.user.find(':') != std::string::npos) reject("'user' must not contain ':'");
}

std::vector<ACL> acl_entries_of(acl_policy policy) {
  std::vector<ACL> entries;
  switch (policy) {
    case acl_policy::open:
      append(entries, ZOO_OPEN_ACL_UNSAFE);
      break;
    case acl_policy::creator_only:
      append(entries, ZOO_CREATOR_ALL_ACL);
      break;
    case acl_policy::read_only_for_others:
      append(entries, ZOO_CREATOR_ALL_ACL);
      append(entries, ZOO_READ_ACL_UNSAFE);
      break;
  }
  return entries;
}

int milliseconds_of(std::chrono::nanoseconds timeout) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
}

}  // namespace dlock::zookeeper::detail
