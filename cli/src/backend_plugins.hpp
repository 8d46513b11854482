// The dlock command's providers: the local backends (file, memory) are linked in; a networked
// backend is a plugin, opened the first time a URL's scheme needs it, so that each URL loads
// only its own backend's client libraries. `dlock` itself (DLOCK_CLI_LOCAL_ONLY, its own C++
// runtime) opens no plugin: for a networked scheme it becomes `dlock-networked`, which does.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <dlock/core.hpp>

namespace dlock::cli {

/// As dlock::make_provider(url), loading the plugin of the URL's backend first if it has one.
/// Throws: std::invalid_argument for a malformed URL, an unknown scheme (also one whose plugin
/// this installation lacks) or option; dlock::error when a plugin is there but cannot be
/// loaded (a client library missing); dlock::connection_error as the backend does.
std::shared_ptr<provider> make_provider(std::string_view url);

/// Where the watchdog helper, dlock-watchdog, is installed (beside the plugins); empty when
/// dlock cannot tell where it runs from.
std::string watchdog_helper_path();

/// Keeps the command line, for hand_over_if_networked. Call it first in main().
void remember_command_line(char** argv);

/// In `dlock`: when `url`'s scheme is not a local backend's, replaces this process with
/// `dlock-networked` and the same command line. Returns when the scheme is local, or in
/// `dlock-networked`, or when this installation has no `dlock-networked` (make_provider then
/// reports the scheme unknown). Call it before changing what an exec carries over (the signal
/// mask). Throws dlock::error when `dlock-networked` is there but cannot be run.
void hand_over_if_networked(std::string_view url);

}  // namespace dlock::cli
