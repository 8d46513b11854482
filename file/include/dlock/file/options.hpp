// dlock/file/options.hpp: dlock::file::options, what a file provider is built from.
#pragma once

#include <chrono>
#include <filesystem>

#include <dlock/core/errors.hpp>

namespace dlock::file {

/// Options of a file provider; validated by the provider's constructor.
struct options {
  /// Where lock files live; created (with parents) if missing. Required.
  std::filesystem::path directory;
  /// Unlink a lock file or semaphore slot file when its exclusive holder releases it (before
  /// unlocking, so no two holders can ever meet), for directories that would otherwise
  /// collect one file per name, e.g. locks named after upload hashes. Read locks never
  /// unlink. Off by default: a missing file costs a create on the next acquire.
  bool remove_files_on_release = false;
  /// How often held locks are checked for a removed or replaced file, beside the immediate
  /// check that inotify triggers. Must be positive.
  std::chrono::nanoseconds monitor_period = std::chrono::seconds(1);
  /// Waiters wake on inotify close events; this bounds the wait for holders that unlock
  /// without closing the file (`flock -u` from a shell). Must be positive.
  std::chrono::nanoseconds retry_period = std::chrono::milliseconds(500);
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

}  // namespace dlock::file
