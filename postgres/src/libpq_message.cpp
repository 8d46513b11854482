#include "libpq_message.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace dlock::postgres::detail {

namespace {

constexpr std::string_view attempt_opening = "connection to server ";
constexpr std::string_view attempt_failed = " failed: ";

bool ends_sentence(const std::string& line) {
  return !line.empty() && std::string_view(".?!:;").find(line.back()) != std::string_view::npos;
}

// Lines joined with a space, runs of blanks made one, no blank at either end. A line that
// begins a sentence (libpq's hints: "Connection refused\n\tIs the server running ...")
// ends the one before it with a full stop.
std::string one_line(std::string_view text) {
  std::string line;
  bool new_line = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      new_line = new_line || c == '\n';
      if (!line.empty() && line.back() != ' ') line += ' ';
      continue;
    }
    if (new_line && std::isupper(static_cast<unsigned char>(c)) && !line.empty()) {
      line.pop_back();  // the blank
      if (!ends_sentence(line)) line += '.';
      line += ' ';
    }
    new_line = false;
    line += c;
  }
  if (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

struct attempt {
  std::string where;  // `at "host" (address), port N`; empty when libpq did not say
  std::string why;
};

// libpq's text split at each "connection to server ... failed: " that begins a line.
std::vector<attempt> attempts_of(std::string_view text) {
  std::vector<attempt> attempts;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t next = at;
    do {
      next = text.find(attempt_opening, next + 1);
    } while (next != std::string_view::npos && text[next - 1] != '\n');
    const std::string_view part = text.substr(at, next == std::string_view::npos ? next : next - at);
    attempt one;
    const auto failed = part.find(attempt_failed);
    if (part.starts_with(attempt_opening) && failed != std::string_view::npos) {
      one.where = one_line(part.substr(attempt_opening.size(), failed - attempt_opening.size()));
      one.why = one_line(part.substr(failed + attempt_failed.size()));
    } else {
      one.why = one_line(part);
    }
    if (!one.why.empty()) attempts.push_back(std::move(one));
    if (next == std::string_view::npos) break;
    at = next;
  }
  return attempts;
}

}  // namespace

std::string libpq_message(const char* text) {
  std::vector<attempt> unique;
  for (auto& one : attempts_of(text ? text : "")) {
    const bool said = std::any_of(unique.begin(), unique.end(),
                                  [&](const attempt& before) { return before.why == one.why; });
    if (!said) unique.push_back(std::move(one));
  }
  if (unique.size() == 1) return unique.front().why;
  std::string joined;
  for (const auto& one : unique) {
    if (!joined.empty()) joined += "; ";
    joined += one.where.empty() ? one.why : one.why + " (" + one.where + ")";
  }
  return joined;
}

}  // namespace dlock::postgres::detail
