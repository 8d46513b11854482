#include "node_layout.hpp"

#include <algorithm>
#include <cstdint>

#include <dlock/core/backend/random_bits.hpp>

namespace dlock::zookeeper::detail {

namespace {

// The sequence ZooKeeper appends: 10 digits (a signed 32-bit counter, zero-padded).
bool is_sequence(std::string_view text) {
  return text.size() == 10 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::string_view> sequence_after(std::string_view name, std::string_view marker) {
  const auto at = name.rfind(marker);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = name.substr(at + marker.size());
  if (!is_sequence(rest)) return std::nullopt;
  return rest;
}

void sort_by_sequence(std::vector<queued_node>& nodes) {
  std::sort(nodes.begin(), nodes.end(),
            [](const queued_node& a, const queued_node& b) { return a.sequence < b.sequence; });
}

}  // namespace

std::string new_protection_prefix() {
  // A version 4 UUID in Java's UUID.toString() form, as Curator writes it.
  std::uint64_t high = random_bits(), low = random_bits();
  high = (high & ~std::uint64_t{0xF000}) | 0x4000;
  low = (low & ~(std::uint64_t{0xC} << 60)) | (std::uint64_t{0x8} << 60);
  static constexpr char hex[] = "0123456789abcdef";
  std::string uuid;
  const auto put = [&](std::uint64_t value, int digits) {
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) uuid += hex[(value >> shift) & 0xF];
  };
  put(high >> 32, 8);
  uuid += '-';
  put(high >> 16, 4);
  uuid += '-';
  put(high, 4);
  uuid += '-';
  put(low >> 48, 4);
  uuid += '-';
  put(low, 12);
  return "_c_" + uuid + "-";
}

std::vector<queued_node> queue_order(const std::vector<std::string>& children) {
  std::vector<queued_node> queue;
  for (const std::string& child : children) {
    for (std::string_view marker : {lock_marker, write_marker, read_marker}) {
      if (auto sequence = sequence_after(child, marker)) {
        queue.push_back({child, std::string(*sequence), marker != read_marker});
        break;
      }
    }
  }
  sort_by_sequence(queue);
  return queue;
}

std::vector<queued_node> ordered_by(const std::vector<std::string>& children,
                                    std::string_view marker) {
  std::vector<queued_node> ordered;
  for (const std::string& child : children) {
    if (auto sequence = sequence_after(child, marker)) {
      ordered.push_back({child, std::string(*sequence), true});
    }
  }
  sort_by_sequence(ordered);
  return ordered;
}

bool is_lease_node(std::string_view name) { return sequence_after(name, lease_marker).has_value(); }

}  // namespace dlock::zookeeper::detail
