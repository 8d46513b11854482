#include "fenced_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace support {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("fenced_store: " + what + ": " + std::strerror(errno));
}

/// The store held under LOCK_EX for one step. The state file holds one fixed-width record,
/// "<highest token> <value> <journal bytes>", rewritten by one pwrite; an accepted write is
/// first appended to the journal (one write, O_APPEND), then the record. A writer killed
/// between the two leaves a journal longer than the record says: the next step replays the
/// tail (a write-ahead log), so the state never loses or repeats an accepted write.
class locked_store {
 public:
  locked_store(const std::filesystem::path& state, const std::filesystem::path& journal)
      : fd_(::open(state.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)),
        journal_fd_(::open(journal.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0 || journal_fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) fail(state.string());
    char text[96] = {};
    if (::pread(fd_, text, sizeof text - 1, 0) > 0) {
      std::sscanf(text, "%lu %ld %ld", &highest_, &value_, &journal_bytes_);
    }
    replay_journal_tail();
  }
  ~locked_store() {
    ::close(journal_fd_);
    ::close(fd_);  // closing drops the flock
  }
  locked_store(const locked_store&) = delete;
  locked_store& operator=(const locked_store&) = delete;

  bool stale(std::uint64_t token) const { return token < highest_; }

  /// Admits `token` (raising the highest token seen) unless it is stale.
  bool admit(std::uint64_t token) {
    if (stale(token)) return false;
    highest_ = token;
    save();
    return true;
  }
  std::int64_t value() const { return value_; }

  void write(std::uint64_t token, std::int64_t value) {
    const std::string line = std::to_string(token) + " " + std::to_string(value) + "\n";
    if (::write(journal_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      fail("journal");
    }
    value_ = value;
    journal_bytes_ += static_cast<long>(line.size());
    save();
  }

 private:
  void replay_journal_tail() {
    struct stat journal {};
    if (::fstat(journal_fd_, &journal) != 0) fail("journal");
    if (journal.st_size <= journal_bytes_) return;
    std::string tail(static_cast<std::size_t>(journal.st_size - journal_bytes_), '\0');
    if (::pread(journal_fd_, tail.data(), tail.size(), journal_bytes_) !=
        static_cast<ssize_t>(tail.size())) {
      fail("journal");
    }
    std::istringstream lines(tail);
    unsigned long token = 0;
    long value = 0;
    while (lines >> token >> value) {
      if (token > highest_) highest_ = token;
      value_ = value;
    }
    journal_bytes_ = journal.st_size;
    save();
  }

  void save() {
    char text[96];
    const int length = std::snprintf(text, sizeof text, "%020lu %020ld %020ld\n", highest_,
                                     value_, journal_bytes_);
    if (::pwrite(fd_, text, length, 0) != length) fail("state");
  }

  int fd_;
  int journal_fd_;
  unsigned long highest_ = 0;
  long value_ = 0;
  long journal_bytes_ = 0;
};

}  // namespace

fenced_store::fenced_store(std::filesystem::path path) : path_(std::move(path)) {
  locked_store create(path_, journal_path());
}

std::optional<std::int64_t> fenced_store::read(std::uint64_t token) const {
  locked_store store(path_, journal_path());
  if (!store.admit(token)) return std::nullopt;
  return store.value();
}

std::optional<std::int64_t> fenced_store::read_shared(std::uint64_t token) const {
  locked_store store(path_, journal_path());
  if (store.stale(token)) return std::nullopt;
  return store.value();
}

bool fenced_store::write(std::uint64_t token, std::int64_t value) const {
  locked_store store(path_, journal_path());
  if (!store.admit(token)) return false;
  store.write(token, value);
  return true;
}

std::filesystem::path fenced_store::journal_path() const {
  return path_.string() + ".journal";
}

}  // namespace support
