// dlock elect and dlock leader: the election subcommands (docs/cli.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace dlock::cli {

/// Parses `dlock elect`'s arguments (after "elect"): the lock options that make sense for a
/// lead (-w, -n, -E, --kill-grace, -v) and --value V before "--". Throws usage_error.
command_line parse_elect_command_line(std::vector<std::string> args,
                                      const std::optional<std::string>& default_url);

/// Runs `dlock leader [URL] NAME [--watch] [--json]` (arguments after "leader"): prints the
/// leader, and with --watch every change until interrupted. Returns the exit status: 0 when
/// someone leads (always 0 with --watch), 1 when nobody does, 64 on bad usage, 69 when the
/// backend cannot be reached.
int run_leader(const std::vector<std::string>& args,
               const std::optional<std::string>& default_url);

}  // namespace dlock::cli
