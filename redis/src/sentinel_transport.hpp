// Private to dlock::redis: the transport to the master of a Sentinel deployment.
#pragma once

#include <memory>

#include "transport.hpp"

namespace dlock::redis::detail {

/// A transport that, at each open, asks the sentinels of settings.sentinel where the master
/// is (each in turn, the last one that answered first), then opens a TCP or TLS transport to
/// it. The connection's log-in then checks the master's ROLE (master_role_check). So every new
/// connection follows a failover, and one lost to a failover finds the new master.
/// Requires: settings.sentinel is set and outlives the transport.
std::unique_ptr<transport> make_sentinel_transport(const boost::asio::any_io_executor& executor,
                                                   const server_settings& settings);

}  // namespace dlock::redis::detail
