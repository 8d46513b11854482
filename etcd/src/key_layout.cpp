#include "key_layout.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <dlock/core/backend/naming.hpp>

namespace dlock::etcd::detail {

namespace {

// Escaped names stay readable and far below etcd's request limits (1.5 MiB by default).
constexpr std::size_t max_escaped_bytes = 200;

constexpr std::string_view read_value = "read";
constexpr std::string_view write_value = "write";
constexpr char owner_separator = '\n';

std::string_view kind_segment(resource_kind kind) {
  switch (kind) {
    case resource_kind::lock:
      return "";
    case resource_kind::reader_writer_lock:
      return ".rw/";
    case resource_kind::semaphore:
      return ".semaphore/";
    case resource_kind::upgrade_gate:
      return ".upgrade-gate/";
    case resource_kind::election:
      return ".election/";
  }
  return "";
}

std::optional<std::uint64_t> parse_count(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string queue_prefix(std::string_view base, resource_kind kind, std::string_view name) {
  std::string prefix(base);
  prefix += kind_segment(kind);
  prefix += naming::escape_segment(name, max_escaped_bytes, false);
  prefix += '/';
  return prefix;
}

std::string contender_key(std::string_view queue, std::int64_t lease_id, std::uint64_t n) {
  char hex[32];
  // fmt.Sprintf("%x", leaseID) of an int64 that etcd hands out positive.
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(lease_id));
  std::string key(queue);
  key += hex;
  if (n > 0) key += "_" + std::to_string(n);
  return key;
}

std::string contender_value(const acquire_request& request) {
  const auto marked = [&](std::string mark) {
    return request.owner.empty() ? mark : mark + owner_separator + request.owner;
  };
  switch (request.kind) {
    case resource_kind::lock:
      return request.owner;
    case resource_kind::reader_writer_lock:
      return marked(std::string(request.mode == lock_mode::shared ? read_value : write_value));
    case resource_kind::semaphore:
      return marked(std::to_string(request.max_count));
    case resource_kind::upgrade_gate:
    case resource_kind::election:
      return "";
  }
  return "";
}

contender_record parse_value(resource_kind kind, std::string_view value) {
  if (kind == resource_kind::lock) return {{}, value};
  const auto separator = value.find(owner_separator);
  if (separator == std::string_view::npos) return {value, {}};
  return {value.substr(0, separator), value.substr(separator + 1)};
}

std::optional<std::uint64_t> recorded_max_count(std::string_view value) {
  return parse_count(parse_value(resource_kind::semaphore, value).mark);
}

verdict queue_verdict(const acquire_request& request, std::string_view own_key,
                      const std::vector<contender>& queue) {
  auto own = std::find_if(queue.begin(), queue.end(),
                          [&](const contender& c) { return c.key == own_key; });
  if (own == queue.end()) return {verdict::action::requeue};
  verdict result;
  if (request.kind == resource_kind::semaphore) {
    for (const contender& c : queue) {
      auto count = recorded_max_count(c.value);
      if (count && *count != request.max_count) {
        result.other_max_count = *count;
        return result;
      }
    }
    const auto before = static_cast<std::uint64_t>(own - queue.begin());
    result.next = before < request.max_count ? verdict::action::grant
                                             : verdict::action::wait_for_any;
    return result;
  }
  const bool reader =
      request.kind == resource_kind::reader_writer_lock && request.mode == lock_mode::shared;
  for (auto it = own; it != queue.begin();) {
    --it;
    if (reader && parse_value(request.kind, it->value).mark == read_value) continue;
    result.next = verdict::action::wait_for_key;
    result.key = it->key;  // the nearest blocker: its delete is the next event that matters
    result.key_revision = it->create_revision;
    break;
  }
  return result;
}

}  // namespace dlock::etcd::detail
