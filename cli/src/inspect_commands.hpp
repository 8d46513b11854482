// dlock ls, dlock inspect and dlock break: the inspector's subcommands (docs/cli.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

/// Runs `args` (argv without argv[0]) when it names one of the inspector's subcommands, and
/// returns its exit status; nullopt for any other command line.
std::optional<int> run_inspect_command(const std::vector<std::string>& args);

}  // namespace dlock::cli
