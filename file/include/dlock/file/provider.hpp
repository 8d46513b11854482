// dlock/file/provider.hpp: dlock::file::provider, locks as flock(2) on files in a directory.
//
// The embedded default: no server, all three primitives, interoperable with flock(1). Locks
// are shared by every process that uses the same directory on the same machine (a local
// file system: flock over NFS is emulated with byte-range locks and is not supported).
// docs/file.md describes the file layout, fencing and what "lost" means here.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include <dlock/core/provider.hpp>
#include <dlock/file/options.hpp>

namespace dlock::file {

namespace detail {
class file_backend;
}

/// The flock(2) provider.
///
/// Mapping: the lock or reader-writer lock `name` is the file
/// `<directory>/<escaped name>.lock` (readers take LOCK_SH, writers and locks LOCK_EX); the
/// semaphore `name` uses slot files `<escaped name>.semaphore.<i>` for i < max_count and
/// `<escaped name>.semaphore` for its count and fencing counter. Escaping keeps letters,
/// digits, '-', '_', '.' (not first) and non-ASCII UTF-8; other bytes become %XX; an escaped
/// name over 200 bytes is cut and suffixed with '~' and its SHA-1 (naming::escape_segment).
///
/// Thread safety: as dlock::provider.
///
///     auto files = std::make_shared<dlock::file::provider>(
///         dlock::file::options{.directory = "/var/lock/app"});
///     dlock::lock_handle h = files->create_lock("import").acquire(5s);
class provider : public dlock::provider {
 public:
  /// Throws std::invalid_argument for an empty directory or a non-positive period;
  /// dlock::connection_error when the directory cannot be created or watched.
  explicit provider(options opts);

  /// The file that the lock or reader-writer lock `name` uses.
  /// Throws std::invalid_argument for an invalid name.
  std::filesystem::path lock_file_path(std::string_view name) const;

 private:
  provider(std::shared_ptr<detail::file_backend> backend, error_handler on_error);
  std::shared_ptr<detail::file_backend> backend_;
};

/// Registers the `file://` scheme with dlock::make_provider: `file:///abs/dir` (or
/// `file://localhost/abs/dir`) with options remove_files=true|false, monitor_period=1s and
/// retry_period=500ms.
void register_scheme();

}  // namespace dlock::file
