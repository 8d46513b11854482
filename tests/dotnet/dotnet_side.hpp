// The .NET side of the dotnet label: the project's own program (interop/Program.cs) over the
// real DistributedLock library from NuGet, which holds, tries and waits as told on its stdin.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

#include <dlock/dlock.hpp>

#include "support.hpp"
#include "timing.hpp"

namespace dotnet_interop {

using namespace std::chrono_literals;

// Without the .NET program (no .NET SDK when CMake configured, or no NuGet to restore from)
// the test skips (exit 77, which CTest reports as skipped) and says why; under CI=true that
// fails it instead, so that CI never passes the label by skipping it.
inline const char* dotnet_program() {
  if (::access(DLOCK_DOTNET_INTEROP, X_OK) != 0) {
    const std::string why = std::string("no .NET program at ") + DLOCK_DOTNET_INTEROP +
                            ": the dotnet label needs a .NET SDK (dotnet on PATH when CMake "
                            "configured) and NuGet to restore DistributedLock from";
    const char* ci = std::getenv("CI");
    if (ci && std::string_view(ci) == "true") FAIL(why);
    std::cout << why << "; skipped" << std::endl;
    std::exit(77);
  }
  return DLOCK_DOTNET_INTEROP;
}

/// One .NET process of the program, for `backend` ("postgres" or "redis") at `servers` (a
/// connection string, or host:port[,host:port...]).
class dotnet_side {
 public:
  dotnet_side(const std::string& backend, const std::string& servers)
      : process_({dotnet_program(), backend, servers},
                 {"DOTNET_CLI_TELEMETRY_OPTOUT=1", "DOTNET_NOLOGO=1"}) {}
  ~dotnet_side() { process_.close_stdin(); }

  /// Sends one command and returns its answer ("held", "taken", "held 12", ...).
  std::string ask(const std::string& command) {
    process_.write_stdin(command + "\n");
    const auto answer = process_.read_line(60s);
    if (!answer) throw std::runtime_error(".NET side gave no answer to: " + command);
    return *answer;
  }
  /// Sends a command whose answer comes later (a wait), read with answer().
  void send(const std::string& command) { process_.write_stdin(command + "\n"); }
  std::optional<std::string> answer(std::chrono::milliseconds within) {
    return process_.read_line(within);
  }

 private:
  support::child_process process_;
};

/// How long the waiting side may take to be granted once the other releases (the timing label
/// holds 1 s; under sanitizers only the outcome counts).
inline const auto handoff_bound = support::latency_bound(1s);

/// Starts a waiting acquire on `provider` (`start_wait` returns its future), lets `release` end
/// the other side's hold once the acquire waits, and checks that the grant follows within
/// handoff_bound. Returns what the future held.
template <class StartWait>
auto granted_after(dlock::provider& provider, StartWait start_wait,
                   const std::function<void()>& release) {
  const auto waits_before = provider.metrics().waits;
  auto waiting = start_wait();
  REQUIRE(support::wait_until([&] { return provider.metrics().waits > waits_before; }));
  const auto released_at = std::chrono::steady_clock::now();
  release();
  REQUIRE(waiting.wait_for(60s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - released_at < handoff_bound);
  return waiting.get();
}

}  // namespace dotnet_interop
