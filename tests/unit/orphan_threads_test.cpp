// An io_thread stopped from its own handler finishes before exit() destroys static objects
// (orphan_threads.hpp); exit() used to go on while it ran.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/io_thread.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

std::atomic<bool> io_thread_deleted{false};
std::atomic<bool> exit_called{false};
std::atomic<bool> handler_done{false};

template <class Condition>
bool wait_for(Condition condition, std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  while (!condition()) {
    if (clock_type::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A static object of the program, made before the io_thread: exit() destroys it after
// whatever was made later. Its destructor waits for the handler, which finishes in time only
// if exit() joined the io thread first.
struct witness {
  std::atomic<bool> destroyed{false};
  ~witness() {
    destroyed = true;
    if (!wait_for([] { return handler_done.load(); }, std::chrono::milliseconds(2000))) {
      _exit(4);
    }
  }
};

witness& the_witness() {
  static witness instance;
  return instance;
}

[[noreturn]] void child() {
  (void)the_witness();
  auto* io = new dlock::io_thread;
  boost::asio::post(io->executor(), [io] {
    delete io;  // stopped from its own thread: it ends once this handler returns
    io_thread_deleted = true;
    (void)wait_for([] { return exit_called.load(); }, std::chrono::milliseconds(5000));
    // With exit() waiting for this thread, the witness stays alive until this handler is
    // done; without, exit() goes on and destroys it meanwhile.
    if (wait_for([] { return the_witness().destroyed.load(); }, std::chrono::milliseconds(300))) {
      _exit(3);
    }
    handler_done = true;
  });
  if (!wait_for([] { return io_thread_deleted.load(); }, std::chrono::milliseconds(5000))) _exit(5);
  exit_called = true;
  std::exit(0);
}

}  // namespace

TEST_CASE("an io_thread stopped from its own handler finishes before exit() destroys statics",
          "[unit]") {
  const pid_t pid = ::fork();
  if (pid == 0) child();
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  // 3: the handler outlived the witness; 4: the witness waited in vain; 5: no handler ran.
  CHECK(WEXITSTATUS(status) == 0);
}
