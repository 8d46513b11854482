// Private to dlock::redis: TLS over TCP (Boost.Asio's ssl::stream over OpenSSL).
#pragma once

#include <memory>

#include "transport.hpp"

namespace dlock::redis::detail {

/// A TLS transport to settings.host:settings.port with settings.tls's context.
/// Requires: settings.tls is set and outlives the transport.
std::unique_ptr<transport> make_tls_transport(const boost::asio::any_io_executor& executor,
                                              const server_settings& settings);

}  // namespace dlock::redis::detail
