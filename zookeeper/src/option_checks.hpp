// Private to dlock::zookeeper: what the provider's constructor checks in its options, and what
// the C client takes from them.
#pragma once

#include <chrono>
#include <vector>

#include "c_client.hpp"

#include <dlock/zookeeper/options.hpp>

namespace dlock::zookeeper::detail {

/// Throws std::invalid_argument naming the first bad option of `opts`.
void validate(const options& opts);

/// The ACL entries of `policy`, for every node the provider creates.
std::vector<ACL> acl_entries_of(acl_policy policy);

/// A validated timeout in the whole milliseconds the C client takes.
int milliseconds_of(std::chrono::nanoseconds timeout);

}  // namespace dlock::zookeeper::detail
