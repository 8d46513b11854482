// Private to dlock::zookeeper: a semaphore's max_count, recorded as the data of its leases
// node, and its current count (Curator's layout has no place for either).
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include <dlock/core/backend/backend.hpp>

namespace dlock::zookeeper::detail {

class zookeeper_backend;

/// The invalid_argument for a semaphore whose leases node records another max_count than
/// the request's; nullptr when it matches or records none (a node Curator made).
std::exception_ptr recorded_count_mismatch(const dlock::backend& backend,
                                           const acquire_request& request,
                                           const std::string& recorded,
                                           const std::string& leases_path);

/// max_count minus the lease nodes now, in one round trip. Blocks up to release_timeout.
/// Throws std::invalid_argument when the recorded max_count differs; connection_error.
/// Requires: not on the backend's io thread.
std::uint32_t count_free_slots(zookeeper_backend& backend, const acquire_request& request);

}  // namespace dlock::zookeeper::detail
