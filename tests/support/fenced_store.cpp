#include "fenced_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace support {

namespace {

/// The store file held under LOCK_EX for one step: "<highest token> <value>".
class locked_file {
 public:
  explicit locked_file(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      throw std::runtime_error("fenced_store: " + path.string() + ": " + std::strerror(errno));
    }
    char text[64] = {};
    const ssize_t got = ::pread(fd_, text, sizeof text - 1, 0);
    if (got > 0) std::sscanf(text, "%lu %ld", &highest_, &value_);
  }
  ~locked_file() { ::close(fd_); }  // closing drops the flock
  locked_file(const locked_file&) = delete;
  locked_file& operator=(const locked_file&) = delete;

  /// Admits `token` (raising the highest token seen) unless it is stale.
  bool admit(std::uint64_t token) {
    if (token < highest_) return false;
    highest_ = token;
    return true;
  }
  std::int64_t value() const { return value_; }
  void save(std::int64_t value) {
    value_ = value;
    char text[64];
    const int length = std::snprintf(text, sizeof text, "%lu %ld\n", highest_, value_);
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text, length, 0) != length) {
      throw std::runtime_error(std::string("fenced_store: write: ") + std::strerror(errno));
    }
  }

 private:
  int fd_;
  unsigned long highest_ = 0;
  long value_ = 0;
};

}  // namespace

fenced_store::fenced_store(std::filesystem::path path) : path_(std::move(path)) {
  locked_file create(path_);
}

std::optional<std::int64_t> fenced_store::read(std::uint64_t token) const {
  locked_file file(path_);
  if (!file.admit(token)) return std::nullopt;
  file.save(file.value());
  return file.value();
}

bool fenced_store::write(std::uint64_t token, std::int64_t value) const {
  locked_file file(path_);
  if (!file.admit(token)) return false;
  file.save(value);
  return true;
}

}  // namespace support
