#include "paused_holder.hpp"

#include <signal.h>

#include <catch2/catch.hpp>

#include "support.hpp"

namespace support {

void run_paused_holder(const std::string& url, const std::string& name,
                       dlock::provider& successor, std::chrono::milliseconds lease_timeout,
                       const paused_holder_steps& steps) {
  child_process holder({helper_path(), "hold", url, name, "lock"});
  const auto acquired = holder.read_line(std::chrono::seconds(10));
  REQUIRE(acquired);
  REQUIRE(acquired->rfind("acquired ", 0) == 0);
  const std::uint64_t stale_token = std::stoull(acquired->substr(9));
  steps.while_held(stale_token);

  holder.signal(SIGSTOP);
  std::optional<dlock::lock_handle> newer;
  try {
    newer = successor.create_lock(name).acquire(lease_timeout);
  } catch (...) {
    holder.signal(SIGCONT);
    throw;
  }
  REQUIRE(newer->fencing_token() > stale_token);
  steps.newer_writes(*newer);

  holder.signal(SIGCONT);
  steps.stale_writes(stale_token);
  CHECK(holder.read_line(lease_timeout) == "lost");
  // Its provider lives on: its release may or may not reach a server that already dropped its
  // session or lease, and its next tries are a fresh client's, on a new session or lease.
  // Nothing of the old grant counts as held: refused while the newer holder holds, granted
  // with a higher token after.
  holder.write_stdin("try\n");
  CHECK(holder.read_line(lease_timeout) == "not acquired");
  CHECK_FALSE(newer->lost());
  const std::uint64_t newer_token = newer->fencing_token();
  newer->release();
  holder.write_stdin("try\n");
  const auto again = holder.read_line(lease_timeout);
  REQUIRE(again);
  REQUIRE(again->rfind("acquired ", 0) == 0);
  CHECK(std::stoull(again->substr(9)) > newer_token);
  holder.close_stdin();
  CHECK(holder.read_line(std::chrono::seconds(10)) == "released");
  CHECK(holder.wait(std::chrono::seconds(10)));
}

}  // namespace support
