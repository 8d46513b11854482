// etcdctl, the etcd project's own client, run as a child process: how the tests look at and
// change what dlock::etcd keeps on the server, with no client code of dlock's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "test_servers.hpp"

namespace support {

/// "127.0.0.1:2379,127.0.0.1:2380": etcdctl's --endpoints for an endpoint URL.
std::string etcd_endpoints(std::string_view url);

/// Runs `etcdctl --endpoints=<endpoints> <arguments>` and returns its standard output.
/// Throws std::runtime_error with its standard error when it fails.
std::string etcdctl(const std::string& endpoints, const std::vector<std::string>& arguments);

/// The keys that begin with `prefix`, in key order.
std::vector<std::string> etcd_keys(const std::string& endpoints, const std::string& prefix);

}  // namespace support
