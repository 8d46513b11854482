#include "lock_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

namespace dlock::file::detail {

namespace {

// The counter is 20 decimal digits and a newline at offset 0: fixed width, so an update is
// one pwrite and a reader never sees a shorter, stale tail. The semaphore file continues
// with "max_count=<n>\n".
constexpr std::size_t counter_bytes = fencing_counter_bytes;
constexpr std::size_t semaphore_header_bytes = 64;

[[noreturn]] void fail(const char* call, const std::string& path, int error) {
  throw file_failure{std::string(call) + "(" + path + "): " + std::strerror(error)};
}

[[noreturn]] void fail(const char* call, int error) {
  throw file_failure{std::string(call) + ": " + std::strerror(error)};
}

/// Holds an open-file-description lock (a write lock unless `type` says F_RDLCK) on
/// [start, start + length) while alive; a length of 0 reaches to the end of the file.
class range_lock {
 public:
  range_lock(int fd, std::size_t length, std::size_t start = 0, short type = F_WRLCK)
      : fd_(fd), length_(length), start_(start) {
    set(type);
  }
  ~range_lock() {
    struct flock unlock_range {};
    unlock_range.l_type = F_UNLCK;
    unlock_range.l_whence = SEEK_SET;
    unlock_range.l_start = static_cast<off_t>(start_);
    unlock_range.l_len = static_cast<off_t>(length_);
    ::fcntl(fd_, F_OFD_SETLK, &unlock_range);
  }
  range_lock(const range_lock&) = delete;
  range_lock& operator=(const range_lock&) = delete;

 private:
  // Not F_OFD_SETLKW: a process stopped (SIGSTOP, a debugger) between its lock and unlock
  // would block the caller, and with it a provider thread, for as long as it stays stopped.
  // Holders keep the range for two system calls, so a short backoff is rarely entered.
  void set(short type) {
    struct flock range {};
    range.l_type = type;
    range.l_whence = SEEK_SET;
    range.l_start = static_cast<off_t>(start_);
    range.l_len = static_cast<off_t>(length_);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto pause = std::chrono::microseconds(20);
    while (::fcntl(fd_, F_OFD_SETLK, &range) != 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EACCES) fail("fcntl(F_OFD_SETLK)", errno);
      if (std::chrono::steady_clock::now() >= give_up) {
        throw file_failure{"the fencing counter or leader record stayed locked by another"
                           " process for 5 s (is that process stopped?)"};
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  int fd_;
  std::size_t length_;
  std::size_t start_;
};

std::string read_prefix(int fd, std::size_t length, std::size_t start = 0) {
  std::string buffer(length, '\0');
  ssize_t got;
  do {
    got = ::pread(fd, buffer.data(), length, static_cast<off_t>(start));
  } while (got < 0 && errno == EINTR);
  if (got < 0) fail("pread", errno);
  buffer.resize(static_cast<std::size_t>(got));
  return buffer;
}

void write_prefix(int fd, std::string_view data, std::size_t start = 0) {
  ssize_t put;
  do {
    put = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(start));
  } while (put < 0 && errno == EINTR);
  if (put < 0) fail("pwrite", errno);
  if (static_cast<std::size_t>(put) != data.size()) fail("pwrite", EIO);
}

std::uint64_t parse_counter(std::string_view text) {
  std::uint64_t value = 0;
  const auto digits = text.substr(0, counter_bytes - 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() ? value : 0;
}

/// The counter's bytes, zero-padded: 20 digits and a newline.
struct formatted_counter {
  char bytes[counter_bytes];
  std::string_view view() const { return {bytes, counter_bytes}; }
};

formatted_counter format_counter(std::uint64_t value) {
  formatted_counter out;
  char digits[counter_bytes];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  const auto length = static_cast<std::size_t>(end - digits);
  std::memset(out.bytes, '0', counter_bytes - 1 - length);
  std::memcpy(out.bytes + (counter_bytes - 1 - length), digits, length);
  out.bytes[counter_bytes - 1] = '\n';
  return out;
}

/// The counter at the start of the file open as `fd` (0 when missing or unreadable).
std::uint64_t read_counter(int fd) {
  char buffer[counter_bytes];
  ssize_t got;
  do {
    got = ::pread(fd, buffer, counter_bytes, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) fail("pread", errno);
  return parse_counter(std::string_view(buffer, static_cast<std::size_t>(got)));
}

}  // namespace

void unique_fd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

unique_fd open_lock_file(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail("open", path, errno);
  return unique_fd(fd);
}

bool try_flock(int fd, lock_mode mode) {
  const int operation = (mode == lock_mode::shared ? LOCK_SH : LOCK_EX) | LOCK_NB;
  while (::flock(fd, operation) != 0) {
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) fail("flock", errno);
  }
  return true;
}

bool path_names_fd(const std::string& path, int fd, std::int64_t* size) {
  struct stat by_path {};
  struct stat by_fd {};
  if (::fstat(fd, &by_fd) != 0) fail("fstat", errno);
  if (size) *size = by_fd.st_size;
  if (::stat(path.c_str(), &by_path) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    fail("stat", path, errno);
  }
  return by_path.st_dev == by_fd.st_dev && by_path.st_ino == by_fd.st_ino;
}

std::uint64_t next_fencing_token(int fd, bool sole_holder) {
  std::optional<range_lock> serialise;
  if (!sole_holder) serialise.emplace(fd, counter_bytes);
  const std::uint64_t stored = read_counter(fd);
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const std::uint64_t next = std::max<std::uint64_t>(stored + 1, static_cast<std::uint64_t>(now));
  write_prefix(fd, format_counter(next).view());
  return next;
}

std::vector<flock_entry> flock_entries() {
  // Lines read "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters carry "->"
  // after the number and hold nothing yet.
  std::ifstream locks("/proc/locks");
  if (!locks) throw file_failure{"cannot read /proc/locks"};
  std::vector<flock_entry> entries;
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string number, kind, advisory, access, where;
    int pid = 0;
    fields >> number >> kind;
    if (kind != "FLOCK") continue;
    fields >> advisory >> access >> pid >> where;
    unsigned major_number = 0, minor_number = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &major_number, &minor_number, &inode) == 3) {
      entries.push_back({makedev(major_number, minor_number), static_cast<ino_t>(inode),
                         access == "WRITE", pid});
    }
  }
  return entries;
}

bool locks_file(const flock_entry& entry, const struct stat& file) {
  if (entry.inode != file.st_ino) return false;
  return major(file.st_dev) == 0 || entry.device == file.st_dev;
}

std::set<std::pair<dev_t, ino_t>> flocked_files() {
  std::set<std::pair<dev_t, ino_t>> held;
  for (const flock_entry& entry : flock_entries()) held.emplace(entry.device, entry.inode);
  return held;
}

bool is_flocked(const std::set<std::pair<dev_t, ino_t>>& flocked, const struct stat& file) {
  if (flocked.count({file.st_dev, file.st_ino})) return true;
  if (major(file.st_dev) != 0) return false;
  for (const auto& [device, inode] : flocked) {
    if (inode == file.st_ino) return true;
  }
  return false;
}

std::uint32_t check_semaphore_count(int fd, std::uint32_t max_count) {
  range_lock serialise(fd, counter_bytes);
  const std::string header = read_prefix(fd, semaphore_header_bytes);
  constexpr std::string_view key = "max_count=";
  if (header.size() > counter_bytes && std::string_view(header).substr(counter_bytes).starts_with(key)) {
    std::uint32_t stored = 0;
    const char* begin = header.data() + counter_bytes + key.size();
    const auto [end, ec] = std::from_chars(begin, header.data() + header.size(), stored);
    if (ec == std::errc() && stored > 0) return stored;
  }
  std::string fresh = header.size() >= counter_bytes ? header.substr(0, counter_bytes)
                                                     : std::string(format_counter(0).view());
  fresh += key;
  fresh += std::to_string(max_count);
  fresh += '\n';
  write_prefix(fd, fresh);
  return max_count;
}

// The leader record follows the counter of an election's lock file: "<term> <bytes>\n<value>".
// Its bytes are guarded by an open-file-description lock (write to change, read to look), so
// a reader never sees half a record; the counter's own range is not touched.
namespace {

std::optional<leader_info> parse_record(std::string_view text) {
  const auto line_end = text.find('\n');
  if (line_end == std::string_view::npos) return std::nullopt;
  std::uint64_t term = 0;
  std::size_t length = 0;
  const std::string_view header = text.substr(0, line_end);
  const auto space = header.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (std::from_chars(header.data(), header.data() + space, term).ec != std::errc() ||
      std::from_chars(header.data() + space + 1, header.data() + header.size(), length).ec !=
          std::errc()) {
    return std::nullopt;
  }
  const std::string_view value = text.substr(line_end + 1);
  if (value.size() < length) return std::nullopt;
  return leader_info{std::string(value.substr(0, length)), term};
}

std::optional<leader_info> read_record_locked(int fd) {
  struct stat file {};
  if (::fstat(fd, &file) != 0) fail("fstat", errno);
  if (static_cast<std::size_t>(file.st_size) <= counter_bytes) return std::nullopt;
  return parse_record(
      read_prefix(fd, static_cast<std::size_t>(file.st_size) - counter_bytes, counter_bytes));
}

void truncate_record(int fd) {
  while (::ftruncate(fd, static_cast<off_t>(counter_bytes)) != 0) {
    if (errno != EINTR) fail("ftruncate", errno);
  }
}

}  // namespace

bool write_leader_record(int fd, std::uint64_t term, std::string_view value) {
  range_lock guard(fd, 0, counter_bytes);
  // Whoever holds the lock has the counter's latest token: a smaller term no longer leads.
  if (read_counter(fd) != term) return false;
  std::string record = std::to_string(term) + " " + std::to_string(value.size()) + "\n";
  record.append(value);
  truncate_record(fd);
  write_prefix(fd, record, counter_bytes);
  return true;
}

void clear_leader_record(int fd, std::uint64_t term) {
  range_lock guard(fd, 0, counter_bytes);
  const auto recorded = read_record_locked(fd);
  if (recorded && recorded->term == term) truncate_record(fd);
}

std::optional<leader_info> read_leader_record(int fd) {
  range_lock guard(fd, 0, counter_bytes, F_RDLCK);
  auto recorded = read_record_locked(fd);
  if (!recorded || recorded->term != read_counter(fd)) {
    return std::nullopt;  // written before the latest grant: its leader is gone
  }
  return recorded;
}

}  // namespace dlock::file::detail
