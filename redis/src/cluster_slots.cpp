#include "cluster_slots.hpp"

#include <array>
#include <charconv>

namespace dlock::redis::detail {

namespace {

constexpr std::array<std::uint16_t, 256> crc16_table() {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[i] = crc;
  }
  return table;
}

constexpr auto crc16_xmodem = crc16_table();

std::uint16_t crc16(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    crc = static_cast<std::uint16_t>((crc << 8) ^
                                     crc16_xmodem[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

template <class Number>
std::optional<Number> parse_number(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool is_slot(long long value) { return value >= 0 && value < cluster_slot_count; }

}  // namespace

std::uint16_t hash_slot(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) % cluster_slot_count);
}

std::optional<std::vector<slot_range>> parse_cluster_slots(const reply& answer,
                                                           const std::string& fallback_host) {
  if (answer.type != reply::kind::array) return std::nullopt;
  std::vector<slot_range> ranges;
  for (const reply& entry : answer.elements) {
    // [first, last, [host, port, id, ...] (the master), replicas...]
    if (entry.type != reply::kind::array || entry.elements.size() < 3) return std::nullopt;
    const reply& first = entry.elements[0];
    const reply& last = entry.elements[1];
    const reply& master = entry.elements[2];
    if (first.type != reply::kind::integer || last.type != reply::kind::integer ||
        !is_slot(first.integer) || !is_slot(last.integer) || first.integer > last.integer ||
        master.type != reply::kind::array || master.elements.size() < 2 ||
        master.elements[1].type != reply::kind::integer || master.elements[1].integer <= 0 ||
        master.elements[1].integer > 65535) {
      return std::nullopt;
    }
    const std::string& host = master.elements[0].text;
    ranges.push_back(slot_range{.first = static_cast<std::uint16_t>(first.integer),
                                .last = static_cast<std::uint16_t>(last.integer),
                                .host = host.empty() || host == "?" ? fallback_host : host,
                                .port = static_cast<std::uint16_t>(master.elements[1].integer)});
  }
  return ranges;
}

std::optional<redirection> parse_redirection(const reply& answer) {
  if (!answer.is_error()) return std::nullopt;
  const std::string_view text = answer.text;
  redirection to;
  std::string_view rest;
  if (text.starts_with("MOVED ")) {
    rest = text.substr(6);
  } else if (text.starts_with("ASK ")) {
    to.ask = true;
    rest = text.substr(4);
  } else {
    return std::nullopt;
  }
  const auto space = rest.find(' ');
  const auto colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  const auto slot = parse_number<std::uint16_t>(rest.substr(0, space));
  const auto port = parse_number<std::uint16_t>(rest.substr(colon + 1));
  if (!slot || *slot >= cluster_slot_count || !port || *port == 0) return std::nullopt;
  to.slot = *slot;
  to.host = std::string(rest.substr(space + 1, colon - space - 1));
  to.port = *port;
  return to;
}

}  // namespace dlock::redis::detail
