// The holder record after a lock file's fencing counter (holder_record.hpp).
#include "holder_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "lock_files.hpp"

namespace dlock::file::detail {

namespace {

// Lines of key=value, the name last because it may hold any byte, newlines included:
//   dlock-holder\n[hold_until_ns=..\n]kind=write\ntoken=..\nsince_us=..\npid=..\nowner=..\n
//   name=<rest of file>
// A minimum hold comes first, so that an acquirer reads it in one short pread; versions that
// know no hold skip the key as any unknown one.
constexpr std::string_view magic = "dlock-holder\n";
constexpr std::string_view hold_key = "hold_until_ns=";

std::string_view kind_word(party_kind kind) {
  switch (kind) {
    case party_kind::read: return "read";
    case party_kind::write: return "write";
    case party_kind::semaphore_slot: return "slot";
    case party_kind::exclusive: break;
  }
  return "exclusive";
}

party_kind kind_of(std::string_view word) {
  if (word == "read") return party_kind::read;
  if (word == "write") return party_kind::write;
  if (word == "slot") return party_kind::semaphore_slot;
  return party_kind::exclusive;
}

template <typename Number>
Number number_of(std::string_view text) {
  Number value{};
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// Appends `value` in decimal: to_chars, without to_string's temporary string.
template <typename Number>
void append_number(std::string& text, Number value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  text.append(digits, end);
}

}  // namespace

void write_holder_record(int fd, const holder_record& record) {
  const auto since_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            record.since.time_since_epoch()).count();
  // One buffer, sized once: this runs on every exclusive grant.
  std::string text;
  text.reserve(magic.size() + 96 + record.owner.size() + record.name.size());
  text += magic;
  if (record.hold_until_ns != 0) {
    text += hold_key;
    append_number(text, record.hold_until_ns);
    text += '\n';
  }
  text += "kind=";
  text += kind_word(record.kind);
  text += "\ntoken=";
  append_number(text, record.fencing_token);
  text += "\nsince_us=";
  append_number(text, since_us);
  text += "\npid=";
  append_number(text, record.pid);
  text += "\nowner=";
  text += record.owner;
  text += "\nname=";
  text += record.name;
  ssize_t put;
  do {
    put = ::pwrite(fd, text.data(), text.size(), fencing_counter_bytes);
  } while (put < 0 && errno == EINTR);
  if (put < 0 || static_cast<std::size_t>(put) != text.size()) {
    throw file_failure{std::string("pwrite of the holder record: ") +
                       std::strerror(put < 0 ? errno : EIO)};
  }
  while (::ftruncate(fd, static_cast<off_t>(fencing_counter_bytes + text.size())) != 0) {
    if (errno != EINTR) throw file_failure{std::string("ftruncate: ") + std::strerror(errno)};
  }
}

void clear_holder_record(int fd) noexcept {
  struct stat file {};
  if (::fstat(fd, &file) != 0 || file.st_size <= static_cast<off_t>(fencing_counter_bytes)) return;
  while (::ftruncate(fd, static_cast<off_t>(fencing_counter_bytes)) != 0 && errno == EINTR) {
  }
}

std::optional<holder_record> read_holder_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (content.size() < fencing_counter_bytes + magic.size()) return std::nullopt;
  std::string_view rest = std::string_view(content).substr(fencing_counter_bytes);
  if (!rest.starts_with(magic)) return std::nullopt;
  rest.remove_prefix(magic.size());
  holder_record record;
  while (!rest.empty()) {
    const auto equals = rest.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view key = rest.substr(0, equals);
    rest.remove_prefix(equals + 1);
    if (key == "name") {
      record.name = std::string(rest);
      return record;
    }
    const auto end = rest.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    const std::string_view value = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    if (key == "kind") record.kind = kind_of(value);
    if (key == "token") record.fencing_token = number_of<std::uint64_t>(value);
    if (key == "since_us") {
      record.since = std::chrono::system_clock::time_point(
          std::chrono::microseconds(number_of<std::int64_t>(value)));
    }
    if (key == "pid") record.pid = number_of<int>(value);
    if (key == hold_key.substr(0, hold_key.size() - 1)) {
      record.hold_until_ns = number_of<std::int64_t>(value);
    }
    if (key == "owner") record.owner = std::string(value);
  }
  return std::nullopt;
}

std::int64_t boot_clock_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::chrono::nanoseconds hold_left(int fd, std::int64_t size) {
  constexpr std::size_t needed = fencing_counter_bytes + magic.size() + hold_key.size();
  if (size <= static_cast<std::int64_t>(needed)) return std::chrono::nanoseconds::zero();
  char buffer[needed - fencing_counter_bytes + 24];
  ssize_t got;
  do {
    got = ::pread(fd, buffer, sizeof buffer, fencing_counter_bytes);
  } while (got < 0 && errno == EINTR);
  if (got < 0) throw file_failure{std::string("pread of the holder record: ") + std::strerror(errno)};
  std::string_view text(buffer, static_cast<std::size_t>(got));
  if (!text.starts_with(magic) || !text.substr(magic.size()).starts_with(hold_key)) {
    return std::chrono::nanoseconds::zero();
  }
  text.remove_prefix(magic.size() + hold_key.size());
  const std::int64_t left = number_of<std::int64_t>(text.substr(0, text.find('\n'))) -
                            boot_clock_ns();
  return std::chrono::nanoseconds(std::max<std::int64_t>(left, 0));
}

std::string read_counter_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string counter(fencing_counter_bytes, '\0');
  if (!in || !in.read(counter.data(), static_cast<std::streamsize>(counter.size()))) return {};
  return counter;
}

}  // namespace dlock::file::detail
