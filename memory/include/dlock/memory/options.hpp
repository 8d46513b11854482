// dlock/memory/options.hpp: dlock::memory::options, what a memory provider is built from.
#pragma once

#include <string>

#include <dlock/core/errors.hpp>

namespace dlock::memory {

/// Options of a memory provider.
struct options {
  /// Providers with the same domain share their locks, as clients of one server would;
  /// different domains are independent. A domain lives as long as the process.
  std::string domain;
  /// Receives errors that have no caller (none are expected from this backend).
  error_handler on_error;
};

}  // namespace dlock::memory
