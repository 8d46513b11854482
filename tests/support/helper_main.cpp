// dlock-test-helper: another process for the multi-process tests.
//
//   dlock-test-helper hold URL NAME MODE    MODE: lock | read | write | semaphore:N
//     acquires, prints "acquired <token>", releases when stdin closes, prints "released".
//   dlock-test-helper contend-upgrade URL NAME ITERATIONS LOGFILE
//     the same with the reader-writer lock NAME, taking the write lock in turns by upgrading
//     an upgradeable read and directly; each section logs the write grant's token.
//   dlock-test-helper contend-all URL NAME1 NAME2 ITERATIONS LOGFILE
//     the same with acquire_all over the locks NAME1 and NAME2, listed in that order.
//   dlock-test-helper contend URL NAME ITERATIONS LOGFILE
//     acquires and releases ITERATIONS times, appending "B <token> <pid>" and
//     "E <token> <pid>" around each critical section (O_APPEND, one write per line).
//   dlock-test-helper contend-election URL NAME ITERATIONS LOGFILE
//     the same with the election NAME: each section is a term, logged with the term.
//   dlock-test-helper lead URL NAME VALUE
//     campaigns in the election NAME with VALUE, prints "leading <term>", resigns when stdin
//     closes, prints "resigned".
//   dlock-test-helper nemesis-worker URL NAME MODE SECONDS LOG STORE MIN_MS MAX_MS
//     MODE: lock | rw | semaphore:N. Takes the lock (a read or write lock, a slot) again and
//     again for SECONDS, holding each MIN_MS to MAX_MS, working on the fenced counter STORE
//     and logging each section to LOG (nemesis_worker.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <iostream>
#include <string>
#include <utility>

#include <dlock/dlock.hpp>

#include "nemesis_worker.hpp"

namespace {

dlock::lock_handle acquire(dlock::provider& provider, const std::string& name,
                           const std::string& mode) {
  if (mode == "lock") return provider.create_lock(name).acquire();
  if (mode == "read") return provider.create_reader_writer_lock(name).acquire_read();
  if (mode == "write") return provider.create_reader_writer_lock(name).acquire_write();
  if (mode.rfind("semaphore:", 0) == 0) {
    return provider.create_semaphore(name, static_cast<std::uint32_t>(std::stoul(mode.substr(10))))
        .acquire();
  }
  throw std::invalid_argument("unknown mode " + mode);
}

void append_line(int fd, const std::string& line) {
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("log write failed");
  }
}

/// Runs `iterations` critical sections, each under what `enter()` returns (a held lock and its
/// token), appending "B <token> <pid>" and "E <token> <pid>" to `log_path` around each.
template <typename Enter>
void log_sections(const char* log_path, int iterations, Enter enter) {
  const int log = ::open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error("cannot open log");
  const std::string pid = std::to_string(::getpid());
  for (int i = 0; i < iterations; ++i) {
    auto [held, token_number] = enter();
    const std::string token = std::to_string(token_number);
    append_line(log, "B " + token + " " + pid + "\n");
    append_line(log, "E " + token + " " + pid + "\n");
  }
  ::close(log);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "hold" && argc == 5) {
    auto provider = dlock::make_provider(argv[2]);
    dlock::lock_handle handle = acquire(*provider, argv[3], argv[4]);
    handle.on_lost([] { std::cout << "lost" << std::endl; });
    std::cout << "acquired " << handle.fencing_token() << std::endl;
    std::string line;
    // "try": let go of the handle (lost or not) and try once more on the same provider.
    while (std::getline(std::cin, line)) {
      if (line != "try") continue;
      try {
        handle.release();
      } catch (const dlock::error&) {
      }
      try {
        auto again = provider->create_lock(argv[3]).try_acquire(std::chrono::seconds(1));
        if (again) handle = std::move(*again);
        std::cout << (again ? "acquired " + std::to_string(handle.fencing_token())
                            : std::string("not acquired"))
                  << std::endl;
      } catch (const dlock::error& e) {
        std::cout << "error " << e.what() << std::endl;
      }
    }
    handle.release();
    std::cout << "released" << std::endl;
    return 0;
  }
  if (command == "contend" && argc == 6) {
    auto provider = dlock::make_provider(argv[2]);
    auto lock = provider->create_lock(argv[3]);
    log_sections(argv[5], std::stoi(argv[4]), [&] {
      dlock::lock_handle handle = lock.acquire();
      const std::uint64_t token = handle.fencing_token();
      return std::pair(std::move(handle), token);
    });
    return 0;
  }
  if (command == "contend-election" && argc == 6) {
    auto provider = dlock::make_provider(argv[2]);
    auto election = provider->create_election(argv[3]);
    log_sections(argv[5], std::stoi(argv[4]), [&] {
      dlock::leadership lead = election.campaign();
      const std::uint64_t term = lead.term();
      return std::pair(std::move(lead), term);
    });
    return 0;
  }
  if (command == "lead" && argc == 5) {
    auto provider = dlock::make_provider(argv[2]);
    dlock::leadership lead = provider->create_election(argv[3]).campaign(argv[4]);
    std::cout << "leading " << lead.term() << std::endl;
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    lead.resign();
    std::cout << "resigned" << std::endl;
    return 0;
  }
  if (command == "contend-upgrade" && argc == 6) {
    auto provider = dlock::make_provider(argv[2]);
    auto rw = provider->create_reader_writer_lock(argv[3]);
    int section = 0;
    log_sections(argv[5], std::stoi(argv[4]), [&] {
      // One of the two handles holds the write lock; the other stays empty.
      std::pair<dlock::upgradeable_lock_handle, dlock::lock_handle> held;
      if (section++ % 2 == 0) {
        held.first = rw.acquire_upgradeable_read();
        held.first.upgrade();
      } else {
        held.second = rw.acquire_write();
      }
      const std::uint64_t token =
          held.first ? held.first.fencing_token() : held.second.fencing_token();
      return std::pair(std::move(held), token);
    });
    return 0;
  }
  if (command == "contend-all" && argc == 7) {
    auto provider = dlock::make_provider(argv[2]);
    auto first = provider->create_lock(argv[3]);
    auto second = provider->create_lock(argv[4]);
    // Both processes log the token of the same lock, so tokens must rise in the log.
    const std::size_t same_lock = std::string(argv[3]) < std::string(argv[4]) ? 0 : 1;
    log_sections(argv[6], std::stoi(argv[5]), [&] {
      // A deadlock would end in this timeout and fail the helper.
      dlock::lock_set both = dlock::acquire_all({first, second}, std::chrono::seconds(60));
      const std::uint64_t token = both.fencing_token(same_lock);
      return std::pair(std::move(both), token);
    });
    return 0;
  }
  if (command == "nemesis-worker" && argc == 10) {
    return support::run_nemesis_worker({.url = argv[2], .name = argv[3], .mode = argv[4],
                                        .seconds = std::stoi(argv[5]), .log = argv[6],
                                        .store = argv[7], .hold_min_ms = std::stoi(argv[8]),
                                        .hold_max_ms = std::stoi(argv[9])});
  }
  std::cerr << "usage: dlock-test-helper hold URL NAME MODE | contend URL NAME N LOG"
               " | contend-upgrade URL NAME N LOG"
               " | contend-election URL NAME N LOG | lead URL NAME VALUE"
               " | contend-all URL NAME1 NAME2 N LOG"
               " | nemesis-worker URL NAME MODE SECONDS LOG STORE MIN_MS MAX_MS\n";
  return 64;
} catch (const std::exception& e) {
  std::cerr << "dlock-test-helper: " << e.what() << '\n';
  return 1;
}
