#include "server_faults.hpp"

#include <signal.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/use_future.hpp>

#include "support.hpp"

namespace support {

double seconds_since(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

bool acquires_again(dlock::provider& provider, const std::string& name) {
  using namespace std::chrono_literals;
  return wait_until(
      [&] {
        try {
          return provider.create_lock(name).try_acquire().has_value();
        } catch (const dlock::connection_error&) {
          return false;
        }
      },
      30s);
}

silent_holder_outcome silence_holder(const std::string& holder_url, dlock::provider& contender,
                                     const std::string& name) {
  using namespace std::chrono_literals;
  child_process holder({helper_path(), "hold", holder_url, name, "lock"});
  const auto acquired = holder.read_line(30s);
  if (!acquired || !acquired->starts_with("acquired ")) {
    throw std::runtime_error("silence_holder: the holder did not acquire '" + name + "'");
  }
  silent_holder_outcome outcome;
  outcome.holder_token = std::stoull(acquired->substr(9));
  const auto waits_before = contender.metrics().waits;
  auto waiting = contender.create_lock(name).async_acquire(60s, {}, boost::asio::use_future);
  if (!wait_until([&] { return contender.metrics().waits > waits_before; }, 10s)) {
    throw std::runtime_error("silence_holder: the contender never waited");
  }
  holder.signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  if (waiting.wait_for(10s) != std::future_status::ready) {
    holder.signal(SIGCONT);
    throw std::runtime_error("silence_holder: no grant within 10 s of the stop");
  }
  outcome.seconds_to_grant = seconds_since(stopped);
  outcome.contender_token = waiting.get().fencing_token();
  holder.signal(SIGCONT);
  outcome.holder_heard = holder.read_line(10s);
  return outcome;
}

}  // namespace support
