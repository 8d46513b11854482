// The worker of a nemesis run (nemesis.hpp), run as `dlock-test-helper nemesis-worker`.
#pragma once

#include <string>

namespace support {

struct nemesis_worker_args {
  std::string url;
  std::string name;
  std::string mode;  ///< lock | rw (read or write, at random each time) | semaphore:N
  int seconds = 0;
  std::string log;
  std::string store;
  int hold_min_ms = 1, hold_max_ms = 1;
};

/// Takes the lock, a read or write lock, or a semaphore's slot again and again for `seconds`,
/// holding each for a random time in [hold_min_ms, hold_max_ms], and logs each section to `log`
/// in history.hpp's format (a B line on entering, an S line on leaving). A lock's holder and
/// a writer read the fenced counter `store` on entering and write it plus one on leaving,
/// whatever lost() says: a holder deposed meanwhile (paused past its lease) tries its old
/// token, as a real one would, and the store must refuse it. A reader reads it on leaving,
/// without raising its token. Errors of the backend (a paused or cut-off server) are ridden
/// out, as a service would. Returns the exit code.
int run_nemesis_worker(const nemesis_worker_args& args);

}  // namespace support
