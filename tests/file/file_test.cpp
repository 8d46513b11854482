// What only the file backend promises: flock(1) interplay, its file layout, safe removal of
// lock files under many processes, and its option checks. The shared semantics are in the
// contract suite.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include <dlock/core/backend/held_check.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/dlock.hpp>

#include "support.hpp"

using namespace std::chrono_literals;
using Catch::Contains;
using support::child_process;
using support::exit_code;

namespace {

std::shared_ptr<dlock::file::provider> files_in(const std::filesystem::path& directory) {
  return std::make_shared<dlock::file::provider>(dlock::file::options{.directory = directory});
}

/// Runs flock(1) with `args` to completion and returns its exit code.
int run_flock(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/flock");
  child_process flock(std::move(args));
  flock.close_stdin();
  const auto status = flock.wait(30s);
  REQUIRE(status);
  return exit_code(*status);
}

}  // namespace

TEST_CASE("dlock waits for a flock(1) holder of the same file", "[file][interop]") {
  support::temp_directory dir;
  auto files = files_in(dir.path());
  const auto path = files->lock_file_path("shared-job").string();
  child_process holder(
      {"/usr/bin/flock", path, "/bin/sh", "-c", "echo ready; cat >/dev/null"});
  REQUIRE(holder.read_line(30s) == std::optional<std::string>("ready"));
  auto lock = files->create_lock("shared-job");
  CHECK_FALSE(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire(50ms));
  holder.close_stdin();
  REQUIRE(holder.wait(30s));
  CHECK(lock.try_acquire(10s));
}

TEST_CASE("flock(1) is kept out while dlock holds the lock, and shares with its readers",
          "[file][interop]") {
  support::temp_directory dir;
  auto files = files_in(dir.path());
  const auto path = files->lock_file_path("shared-job").string();
  {
    auto held = files->create_lock("shared-job").try_acquire();
    REQUIRE(held);
    CHECK(run_flock({"-n", path, "true"}) == 1);
    CHECK(run_flock({"-n", "-s", path, "true"}) == 1);
  }
  CHECK(run_flock({"-n", path, "true"}) == 0);
  {
    auto read = files->create_reader_writer_lock("shared-job").try_acquire_read();
    REQUIRE(read);
    CHECK(run_flock({"-n", "-s", path, "true"}) == 0);
    CHECK(run_flock({"-n", path, "true"}) == 1);
  }
}

TEST_CASE("lock names map to files as docs/file.md says", "[file][naming]") {
  support::temp_directory dir;
  auto files = files_in(dir.path());
  CHECK(files->lock_file_path("job") == dir.path() / "job.lock");
  CHECK(files->lock_file_path("reports/2024 q1") == dir.path() / "reports%2F2024%20q1.lock");
  CHECK(files->lock_file_path(".hidden") == dir.path() / "%2Ehidden.lock");
  const std::string long_name(300, 'x');
  const auto long_file = files->lock_file_path(long_name).filename().string();
  CHECK(long_file.size() <= 205);
  CHECK_THAT(long_file, Contains("~" + dlock::naming::sha1_hex(long_name)));
  // The file really is the one the lock uses.
  auto held = files->create_lock("reports/2024 q1").try_acquire();
  REQUIRE(held);
  CHECK(std::filesystem::exists(dir.path() / "reports%2F2024%20q1.lock"));
}

TEST_CASE("the lock directory is created with its parents", "[file]") {
  support::temp_directory dir;
  const auto nested = dir.path() / "a" / "b" / "locks";
  auto files = files_in(nested);
  CHECK(files->create_lock("job").try_acquire());
  CHECK(std::filesystem::is_directory(nested));
}

TEST_CASE("bad file options are rejected naming the option", "[file]") {
  CHECK_THROWS_WITH(dlock::file::provider({}), Contains("directory"));
  CHECK_THROWS_WITH(dlock::file::provider({.directory = "/tmp", .monitor_period = 0s}),
                    Contains("monitor_period"));
  CHECK_THROWS_WITH(dlock::make_provider("file://remote-host/tmp/x"), Contains("remote-host"));
  CHECK_THROWS_WITH(dlock::make_provider("file:///tmp/x?remove_files=maybe"),
                    Contains("remove_files"));
  CHECK_THROWS_WITH(dlock::make_provider("file:///tmp/x?retry_period=fast"),
                    Contains("retry_period"));
}

TEST_CASE("removing lock files on release never lets two processes in at once",
          "[file][multiprocess][exclusion]") {
  support::temp_directory dir;
  support::temp_directory logs;
  const auto log = logs.path() / "sections.log";
  constexpr int processes = 6;
  constexpr int iterations = 150;
  support::run_contenders("file://" + dir.path().string() + "?remove_files=true", "churn",
                          processes, iterations, log);
  CHECK(support::count_exclusive_sections(log) == processes * iterations);
  // Every holder removed its file on release.
  CHECK_FALSE(std::filesystem::exists(dir.path() / "churn.lock"));
}

TEST_CASE("a lock whose file an operator deletes is lost, and the name is free again",
          "[file][lost]") {
  support::temp_directory dir;
  auto files = files_in(dir.path());
  auto held = files->create_lock("job").try_acquire();
  REQUIRE(held);
  std::filesystem::remove(files->lock_file_path("job"));
  CHECK(support::wait_until([&] { return held->lost(); }, 5s));
  CHECK(files_in(dir.path())->create_lock("job").try_acquire());
}

TEST_CASE("a holder that checks its locks itself finds a deleted file lost at its check",
          "[file][lost]") {
  support::temp_directory dir;
  auto files = std::make_shared<dlock::file::provider>(
      dlock::file::options{.directory = dir.path(), .monitor_period = 250ms});
  CHECK(dlock::check_held_by_caller(*files) == std::optional<std::chrono::nanoseconds>(250ms));
  auto held = files->create_lock("job").try_acquire();
  REQUIRE(held);
  std::atomic<bool> told{false};
  held->on_lost([&] { told = true; });
  dlock::check_held_locks(*files);
  CHECK_FALSE(held->lost());
  std::filesystem::remove(files->lock_file_path("job"));
  dlock::check_held_locks(*files);
  CHECK(held->lost());  // at once: the check ran on this thread
  CHECK(support::wait_until([&] { return told.load(); }, 5s));
}

TEST_CASE("a fencing counter left locked by a stopped process fails the grant, not the thread",
          "[file][fault]") {
  support::temp_directory dir;
  auto files = files_in(dir.path());
  const auto path = files->lock_file_path("stuck");
  { (void)files->create_reader_writer_lock("stuck").try_acquire_read(); }  // creates the file
  // What a process stopped in the middle of its counter update leaves behind.
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_len = 21;
  REQUIRE(::fcntl(fd, F_OFD_SETLK, &range) == 0);
  CHECK_THROWS_WITH(files->create_reader_writer_lock("stuck").try_acquire_read(),
                    Contains("fencing counter") && Contains(dir.path().string()));
  ::close(fd);
  CHECK(files->create_reader_writer_lock("stuck").try_acquire_read());
}

// A provider needs no descriptor of its own until it is used (Asio's reactor is made with its
// thread, io_thread.hpp): the first acquire is where a process out of descriptors hears why.
TEST_CASE("with no file descriptor left, an acquire is a dlock::error naming the cause",
          "[file][limits]") {
#ifdef DLOCK_TESTS_UNDER_UBSAN
  // UBSan's vptr check reads memory through a pipe: in a process with no descriptor left it
  // reports every virtual call it has not seen before as an invalid vptr. This case runs in
  // the TSan and unsanitized builds instead.
  WARN("not run under UBSan");
  return;
#endif
  support::temp_directory dir;
  support::descriptors_used_up used_up;
  std::string message;
  try {
    [[maybe_unused]] auto held = files_in(dir.path())->create_lock("starved").try_acquire();
  } catch (const dlock::error& e) {
    message = e.what();
  }
  used_up.give_back();
  REQUIRE(used_up.open_errno() == EMFILE);
  CHECK_THAT(message, Contains("Too many open files"));
  CHECK(files_in(dir.path())->create_lock("after").try_acquire());
}
