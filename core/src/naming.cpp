#include <dlock/core/backend/naming.hpp>

#include <cstdint>
#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <vector>

#include <boost/uuid/detail/sha1.hpp>

namespace dlock::naming {

namespace {

/// Length of the UTF-8 sequence starting at `at`, or 0 when it is not valid UTF-8.
std::size_t utf8_sequence_length(std::string_view s, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint32_t code = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (at + length > s.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(at + i) & 0x3F);
  }
  static constexpr std::uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

bool kept_ascii(unsigned char c, bool first) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
  if (c == '-' || c == '_') return true;
  return c == '.' && !first;
}

constexpr char hex_digits[] = "0123456789ABCDEF";

}  // namespace

void validate_name(std::string_view name) {
  if (name.empty()) throw std::invalid_argument("dlock: lock name must not be empty");
  if (name.size() > max_name_bytes) {
    throw std::invalid_argument("dlock: lock name '" + quote_for_message(name) + "' is " +
                                std::to_string(name.size()) + " bytes; the limit is " +
                                std::to_string(max_name_bytes));
  }
  for (std::size_t at = 0; at < name.size();) {
    const std::size_t length = utf8_sequence_length(name, at);
    if (length == 0) {
      throw std::invalid_argument("dlock: lock name '" + quote_for_message(name) +
                                  "' is not valid UTF-8 (at byte " + std::to_string(at) + ")");
    }
    at += length;
  }
}

std::string escape_segment(std::string_view name, std::size_t max_bytes, bool keep_non_ascii) {
  // Most names need no escaping: one pass and one copy (a backend escapes per grant).
  if (name.size() <= max_bytes) {
    std::size_t kept = 0;
    while (kept < name.size() && kept_ascii(static_cast<unsigned char>(name[kept]), kept == 0)) {
      ++kept;
    }
    if (kept == name.size()) return std::string(name);
  }
  std::string escaped;
  // Byte offsets in `escaped` where a character (escaped or not) ends: the legal cut points.
  std::vector<std::size_t> boundaries;
  for (std::size_t at = 0; at < name.size();) {
    const auto c = static_cast<unsigned char>(name[at]);
    const std::size_t length = utf8_sequence_length(name, at);
    if (kept_ascii(c, at == 0)) {
      escaped.push_back(static_cast<char>(c));
    } else if (c >= 0x80 && keep_non_ascii && length > 1) {
      escaped.append(name.substr(at, length));
    } else {
      for (std::size_t i = 0; i < std::max<std::size_t>(length, 1); ++i) {
        const auto b = static_cast<unsigned char>(name[at + i]);
        escaped.push_back('%');
        escaped.push_back(hex_digits[b >> 4]);
        escaped.push_back(hex_digits[b & 0x0F]);
      }
    }
    at += std::max<std::size_t>(length, 1);
    boundaries.push_back(escaped.size());
  }
  if (escaped.size() <= max_bytes) return escaped;

  const std::string suffix = "~" + sha1_hex(name);
  const std::size_t room = max_bytes - suffix.size();
  std::size_t cut = 0;
  for (std::size_t boundary : boundaries) {
    if (boundary > room) break;
    cut = boundary;
  }
  escaped.resize(cut);
  return escaped + suffix;
}

std::string unescape_segment(std::string_view escaped) {
  if (escaped.find('~') != std::string_view::npos) return std::string(escaped);
  std::string name;
  for (std::size_t at = 0; at < escaped.size(); ++at) {
    unsigned byte = 0;
    const char* hex = escaped.data() + at + 1;
    if (escaped[at] == '%' && at + 2 < escaped.size() &&
        std::from_chars(hex, hex + 2, byte, 16).ptr == hex + 2) {
      name += static_cast<char>(byte);
      at += 2;
    } else {
      name += escaped[at];
    }
  }
  return name;
}

std::string sha1_hex(std::string_view data) {
  boost::uuids::detail::sha1 sha;
  sha.process_bytes(data.data(), data.size());
  boost::uuids::detail::sha1::digest_type digest;
  sha.get_digest(digest);
  static constexpr char lower_hex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int word : digest) {
    for (int shift = 28; shift >= 0; shift -= 4) hex.push_back(lower_hex[(word >> shift) & 0xF]);
  }
  return hex;
}

std::string quote_for_message(std::string_view name) {
  constexpr std::size_t shown = 80;
  std::string quoted;
  for (std::size_t i = 0; i < name.size() && i < shown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\') {
      quoted += "\\x";
      quoted.push_back(hex_digits[c >> 4]);
      quoted.push_back(hex_digits[c & 0x0F]);
    } else {
      quoted.push_back(static_cast<char>(c));
    }
  }
  if (name.size() > shown) quoted += "...";
  return quoted;
}

}  // namespace dlock::naming
