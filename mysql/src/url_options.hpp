// Private to dlock::mysql: options from a mysql:// or mariadb:// URL.
#pragma once

#include <dlock/core/backend/provider_url.hpp>
#include <dlock/mysql/options.hpp>

namespace dlock::mysql::detail {

/// The options `url` describes (provider.hpp's register_scheme() lists them). Takes what it
/// knows from url.options. Throws std::invalid_argument naming a bad or unknown option.
options options_from_url(provider_url& url);

}  // namespace dlock::mysql::detail
