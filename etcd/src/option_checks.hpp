// Private to dlock::etcd: the checks of dlock::etcd::options.
#pragma once

#include <dlock/etcd/options.hpp>

namespace dlock::etcd::detail {

/// Throws std::invalid_argument naming the first bad option.
void validate(const options& opts);

}  // namespace dlock::etcd::detail
