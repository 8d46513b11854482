// dlock check: asks the lock service whether a fencing token still holds a lock (docs/cli.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

/// Runs `args` (argv without argv[0]) when it is a `check` command line, and returns its exit
/// status: 0 current, 1 not current, 64 usage, 69 backend unreachable or unable to tell;
/// nullopt for any other command line.
std::optional<int> run_check_command(const std::vector<std::string>& args);

}  // namespace dlock::cli
