// dlock-clock-jump-probe: a holder or waiter whose wall clock the clock-jump test
// (clock_jump_test.cpp) moves by hours while it waits or holds, through libfaketime's timestamp
// file. It reads one command per line on stdin and answers each with one line on stdout:
//
//   acquire NAME MIN_HOLD_MS  ->  granted TOKEN          (keeps the handle; one at a time)
//   try NAME TIMEOUT_MS       ->  trying, then granted TOKEN MS or refused MS
//                                 (MS: the monotonic time the attempt took)
//   held                      ->  held 1 while the kept handle is held and not lost, else held 0
//   release                   ->  released
//
// Any failure answers "error WHAT" and ends the probe. Dynamically linked and built without a
// sanitizer: libfaketime is a preload.
#include <chrono>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <dlock/dlock.hpp>

namespace {

long long milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: dlock-clock-jump-probe URL (commands on stdin)\n";
    return 64;
  }
  auto provider = dlock::make_provider(argv[1]);
  std::optional<dlock::lock_handle> kept;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command, name;
    long long milliseconds = 0;
    words >> command >> name >> milliseconds;
    if (command == "acquire") {
      auto lock = provider->create_lock(name).with_min_hold(
          std::chrono::milliseconds(milliseconds));
      kept = lock.acquire();
      std::cout << "granted " << kept->fencing_token() << std::endl;
    } else if (command == "try") {
      std::cout << "trying" << std::endl;
      const auto start = std::chrono::steady_clock::now();
      auto held = provider->create_lock(name).try_acquire(std::chrono::milliseconds(milliseconds));
      const long long took = milliseconds_since(start);
      if (held) {
        std::cout << "granted " << held->fencing_token() << " " << took << std::endl;
      } else {
        std::cout << "refused " << took << std::endl;
      }
    } else if (command == "held") {
      std::cout << "held " << (kept && kept->held() ? 1 : 0) << std::endl;
    } else if (command == "release") {
      if (kept) kept->release();
      kept.reset();
      std::cout << "released" << std::endl;
    } else {
      std::cout << "error unknown command: " << line << std::endl;
      return 64;
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::cout << "error " << e.what() << std::endl;
  return 1;
}
