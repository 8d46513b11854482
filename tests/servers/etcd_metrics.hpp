// An etcd member's own counters (its Prometheus endpoint, /metrics on the client port): how a
// test counts the calls dlock made to it, with no seam in dlock.
#pragma once

#include <string>
#include <string_view>

namespace support {

/// The sum of the values of the series in http://<host_port>/metrics whose lines begin with
/// `series`, e.g. `grpc_server_started_total{grpc_method="Txn",`. Throws std::runtime_error
/// when the member does not answer 200 or has no such series.
double etcd_metric(const std::string& host_port, std::string_view series);

}  // namespace support
