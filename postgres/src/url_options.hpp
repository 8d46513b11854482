// Private to dlock::postgres: a postgres:// URL as the options of a provider.
#pragma once

#include <dlock/core/backend/provider_url.hpp>
#include <dlock/postgres/options.hpp>

namespace dlock::postgres::detail {

/// The options a `postgres://` or `postgresql://` URL stands for: dlock's own query options
/// are taken into their fields, and the rest, libpq's, become options.connection_string.
/// Throws std::invalid_argument naming a bad or unknown option.
options options_from_url(provider_url& url);

}  // namespace dlock::postgres::detail
