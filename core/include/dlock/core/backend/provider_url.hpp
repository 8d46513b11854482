// dlock/core/backend/provider_url.hpp: provider URLs and the scheme registry behind make_provider.
//
// Core owns the registry; each backend offers a register_scheme() function and the umbrella
// library dlock::dlock (<dlock/dlock.hpp>) calls those of every backend it was built with,
// because static self-registration is dropped from static archives.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

class provider;

/// A parsed `scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...]`.
/// Percent-escapes in user, password, path and values are decoded.
struct provider_url {
  struct host_port {
    std::string host;
    std::optional<std::uint16_t> port;
  };
  std::string scheme;
  std::string user;
  std::optional<std::string> password;
  std::vector<host_port> hosts;           ///< empty for file:///path
  std::string path;                       ///< with its leading '/', decoded
  std::map<std::string, std::string> options;

  /// Parses `url`. Throws std::invalid_argument naming what is malformed (the password is
  /// never repeated in the message).
  static provider_url parse(std::string_view url);

  /// The URL without its password, for messages.
  std::string redacted() const;

  /// Removes and returns option `key`, or nullopt. Backends take what they know, then call
  /// reject_unknown_options().
  std::optional<std::string> take_option(std::string_view key);
  /// Throws std::invalid_argument naming every option left (so a typo is an error).
  void reject_unknown_options() const;
};

/// Parses a duration option such as "30s", "250ms", "1.5s", "2m", "1h", "500us".
/// Throws std::invalid_argument naming `field` when `text` has no unit or is malformed.
std::chrono::nanoseconds parse_duration(std::string_view field, std::string_view text);

/// Parses "true"/"false"/"1"/"0"; throws std::invalid_argument naming `field`.
bool parse_bool(std::string_view field, std::string_view text);

using provider_factory = std::function<std::shared_ptr<provider>(provider_url)>;

/// Registers the factory for `scheme` (replacing an earlier one). Thread-safe.
void register_scheme(std::string scheme, provider_factory factory);

/// Builds a provider from `url` with the factory registered for its scheme.
/// Throws std::invalid_argument for a malformed URL, an unknown scheme (listing the known
/// ones) or an unknown option; dlock::connection_error when the backend is unreachable.
std::shared_ptr<provider> create_registered_provider(std::string_view url);

}  // namespace dlock
