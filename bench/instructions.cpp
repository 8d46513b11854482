// dlock-instructions: the uncontended acquire + release loop that bench/instructions.sh counts
// instructions of under callgrind, a figure that the machine's load cannot move.
//
//   dlock-instructions file|memory|memory-callback|memory-awaitable|flock-floor [ITERATIONS]
//
// Warms up (the first grants create the lock file and fill caches), then runs ITERATIONS
// cycles with callgrind's instrumentation on (valgrind --instr-atstart=no), and only those.
// `flock-floor` is the raw open + flock(LOCK_EX) + flock(LOCK_UN) + close that the file
// backend's grant and release are built on. `memory-callback` and `memory-awaitable` are the
// async rows of docs/benchmarks.md counted so: async_acquire on the memory backend with a
// callback bound to an io_context this thread runs, or with use_awaitable in a coroutine there,
// and the release. Without valgrind it just runs.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>  // before awaitable.hpp, which uses std::exchange without it (Boost 1.74)

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include <dlock/file.hpp>
#include <dlock/memory.hpp>

namespace {

template <typename Cycle>
void measure(int iterations, Cycle cycle) {
  for (int i = 0; i < 1000; ++i) cycle();
  CALLGRIND_START_INSTRUMENTATION;
  for (int i = 0; i < iterations; ++i) cycle();
  CALLGRIND_STOP_INSTRUMENTATION;
}

void dlock_cycles(const std::shared_ptr<dlock::provider>& provider, int iterations) {
  dlock::distributed_lock lock = provider->create_lock("instructions");
  measure(iterations, [&] { lock.acquire().release(); });
}

void async_cycles(bool awaitable, int iterations) {
  auto provider = std::make_shared<dlock::memory::provider>(dlock::memory::options{});
  dlock::distributed_lock lock = provider->create_lock("instructions");
  boost::asio::io_context context;
  const auto by_callback = [&] {
    lock.async_acquire(dlock::forever, {},
                       boost::asio::bind_executor(
                           context, [](std::exception_ptr error, dlock::lock_handle handle) {
                             if (error) std::abort();
                             handle.release();
                           }));
  };
  // One coroutine runs every cycle, so that what is counted is the co_await, not co_spawn.
  int left = 0;
  const auto by_coroutine = [&]() -> boost::asio::awaitable<void> {
    while (left > 0) {
      dlock::lock_handle handle =
          co_await lock.async_acquire(dlock::forever, {}, boost::asio::use_awaitable);
      handle.release();
      --left;
    }
  };
  const auto run = [&](int cycles) {
    if (!awaitable) {
      for (int i = 0; i < cycles; ++i) {
        by_callback();
        context.restart();
        context.run();
      }
      return;
    }
    left = cycles;
    boost::asio::co_spawn(context, by_coroutine, boost::asio::detached);
    context.restart();
    context.run();
  };
  run(1000);
  CALLGRIND_START_INSTRUMENTATION;
  run(iterations);
  CALLGRIND_STOP_INSTRUMENTATION;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 10000;
  if (what == "memory-callback" || what == "memory-awaitable") {
    if (iterations <= 0) return 64;
    async_cycles(what == "memory-awaitable", iterations);
    return 0;
  }
  if (iterations <= 0 || (what != "file" && what != "memory" && what != "flock-floor")) {
    std::cerr << "usage: dlock-instructions "
                 "file|memory|memory-callback|memory-awaitable|flock-floor [ITERATIONS]\n";
    return 64;
  }
  char scratch[] = "/tmp/dlock-instructions.XXXXXX";
  if (!::mkdtemp(scratch)) {
    std::perror("mkdtemp");
    return 1;
  }
  if (what == "file") {
    dlock_cycles(std::make_shared<dlock::file::provider>(dlock::file::options{.directory = scratch}),
                 iterations);
  } else if (what == "memory") {
    dlock_cycles(std::make_shared<dlock::memory::provider>(dlock::memory::options{}), iterations);
  } else {
    const std::string path = std::string(scratch) + "/instructions.lock";
    measure(iterations, [&] {
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::flock(fd, LOCK_UN) != 0) std::abort();
      ::close(fd);
    });
  }
  std::filesystem::remove_all(scratch);
  return 0;
}
