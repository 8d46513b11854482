// The contract suite against dlock::file, in a fresh directory per test process.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "support.hpp"

namespace contract {

namespace {

// The locks /proc/locks lists on the file `path` ("FLOCK WRITE", "OFDLCK WRITE waiting", ...).
// Files whose stat() reports an anonymous device (overlayfs) are matched on the inode alone.
std::vector<std::string> locks_on(const std::filesystem::path& path) {
  struct stat file {};
  if (::stat(path.c_str(), &file) != 0) return {};
  std::vector<std::string> found;
  std::ifstream proc_locks("/proc/locks");
  for (std::string line; std::getline(proc_locks, line);) {
    // "1: FLOCK  ADVISORY  WRITE 4711 08:02:1234 0 EOF", a blocked request with "->" after "1:".
    std::istringstream fields(line);
    std::string number, type, advisory, mode, pid, device;
    fields >> number >> type;
    const bool waiting = type == "->";
    if (waiting) fields >> type;
    fields >> advisory >> mode >> pid >> device;
    unsigned major_id = 0, minor_id = 0;
    unsigned long inode = 0;
    if (std::sscanf(device.c_str(), "%x:%x:%lu", &major_id, &minor_id, &inode) != 3) continue;
    if (inode != file.st_ino) continue;
    if (major(file.st_dev) != 0 && makedev(major_id, minor_id) != file.st_dev) continue;
    found.push_back(type + " " + mode + (waiting ? " waiting" : ""));
  }
  return found;
}

// Whether `file` is `semaphore` (count and counter) or one of its slots, `semaphore`.<i>.
bool is_semaphore_file(std::string_view file, std::string_view semaphore) {
  if (file.substr(0, semaphore.size()) != semaphore) return false;
  const std::string_view slot = file.substr(semaphore.size());
  return slot.empty() || (slot.size() > 1 && slot[0] == '.' &&
                          std::all_of(slot.begin() + 1, slot.end(),
                                      [](char c) { return c >= '0' && c <= '9'; }));
}

// Replaces rather than removes: a new file of the same name that anyone may lock.
void replace_file(const std::filesystem::path& path) {
  const auto replacement = path.string() + ".new";
  std::ofstream(replacement).put('\n');
  std::filesystem::rename(replacement, path);
}

class file_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "file"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::file::provider>(
        dlock::file::options{.directory = directory_.path()});
  }

  std::string url() const override { return "file://" + directory_.path().string(); }

  // A release unlocks on the caller's thread: it never waits for another.
  std::shared_ptr<dlock::provider> make_provider_with_release_timeout(
      std::chrono::milliseconds) override {
    return make_provider();
  }

  void break_lock(const std::string& name) override {
    dlock::file::provider files({.directory = directory_.path()});
    replace_file(files.lock_file_path(name));
  }

  // The election's lock file is the lock's with ".election" for ".lock" (docs/election.md).
  void break_election(const std::string& name) override {
    dlock::file::provider files({.directory = directory_.path()});
    auto path = files.lock_file_path(name);
    replace_file(path.replace_extension(".election"));
  }

  // The flock(2) and counter locks on the name's lock file, writers file, upgrade gate,
  // semaphore file and slot files (docs/file.md); the files themselves stay unless remove_files
  // is set.
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    dlock::file::provider files({.directory = directory_.path()});
    const std::string lock_file = files.lock_file_path(name).filename().string();
    const std::string escaped =
        lock_file.substr(0, lock_file.size() - std::string_view(".lock").size());
    const std::string writers_file = escaped + ".writers";
    const std::string gate_file = escaped + ".upgrade-gate";
    const std::string semaphore_files = escaped + ".semaphore";
    std::vector<std::string> footprint;
    for (const auto& entry : std::filesystem::directory_iterator(directory_.path())) {
      const std::string file = entry.path().filename().string();
      if (file != lock_file && file != writers_file && file != gate_file &&
          !is_semaphore_file(file, semaphore_files)) {
        continue;
      }
      for (const std::string& lock : locks_on(entry.path())) footprint.push_back(file + " " + lock);
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // A waiter tries with LOCK_NB and watches the directory: it holds nothing while it waits,
  // except that a reader-writer waiter holds the writers file (a writer from its first try,
  // a reader while it waits for a writer that holds the lock).
  bool footprint_shows_waiters(dlock::primitive kind) const override {
    return kind == dlock::primitive::reader_writer_lock;
  }

  // In the holder record, by the boot clock (docs/semantics.md, "Minimum hold time").
  bool keeps_min_hold() const override { return true; }

  bool pushes_leader_changes() const override { return true; }
  // Readers share their file: only an exclusive holder writes its owner there.
  bool inspect_sees_every_owner() const override { return false; }

  void acquire_from_unreachable_endpoint() override {
    // A directory below a regular file can never be created.
    auto files = std::make_shared<dlock::file::provider>(
        dlock::file::options{.directory = unreachable_endpoint()});
    (void)files->create_lock("x").try_acquire();
  }

  std::string unreachable_endpoint() const override {
    return (directory_.path() / "a-regular-file" / "locks").string();
  }

  file_fixture() { std::ofstream(directory_.path() / "a-regular-file").put('\n'); }

 private:
  support::temp_directory directory_;
};

}  // namespace

backend_fixture& backend() {
  static file_fixture instance;
  return instance;
}

}  // namespace contract
