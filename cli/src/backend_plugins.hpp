// The dlock command's providers: the local backends (file, memory) are linked in; a networked
// backend is a plugin, opened the first time a URL's scheme needs it, so that each URL loads
// only its own backend's client libraries.
#pragma once

#include <memory>
#include <string_view>

#include <dlock/core.hpp>

namespace dlock::cli {

/// As dlock::make_provider(url), loading the plugin of the URL's backend first if it has one.
/// Throws: std::invalid_argument for a malformed URL, an unknown scheme (also one whose plugin
/// this installation lacks) or option; dlock::error when a plugin is there but cannot be
/// loaded (a client library missing); dlock::connection_error as the backend does.
std::shared_ptr<provider> make_provider(std::string_view url);

}  // namespace dlock::cli
