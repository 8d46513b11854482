// dlock/memory/provider.hpp: dlock::memory::provider, locks whose scope is one process.
//
// Not a mock: a backend like the others, with the same contract (FIFO waits, timeouts, stop
// requests, reader-writer locks whose writers do not starve, semaphores, fencing tokens, lost
// signalling), whose locks are shared by every provider of the same domain in this process
// and by nothing outside it. Use it to unit-test code that takes a provider without any
// server, and for single-process deployments. docs/memory.md has the details.
#pragma once

#include <string>
#include <string_view>

#include <dlock/core/provider.hpp>
#include <dlock/memory/options.hpp>

namespace dlock::memory {

namespace detail {
class memory_backend;
}

/// The in-process provider. Thread safety: as dlock::provider.
///
///     auto locks = std::make_shared<dlock::memory::provider>();
///     report_job job(locks);           // the service under test takes a lock_provider
///     locks->break_lock("nightly");    // and sees its handle lost, as after a crash
class provider : public dlock::provider {
 public:
  explicit provider(options opts = {});

  // break_lock(name) (dlock::provider's) takes every grant of `name` away from its holders, as
  // an expired lease or a dead session would: their handles are marked lost and waiters may
  // be granted at once. Handy for tests of the code that handles a loss.

 private:
  provider(std::shared_ptr<detail::memory_backend> backend, error_handler on_error);
  std::shared_ptr<detail::memory_backend> backend_;
};

/// Registers the `memory://` scheme with dlock::make_provider: `memory://` (the default
/// domain) or `memory:///domain-name`; no options.
void register_scheme();

}  // namespace dlock::memory
