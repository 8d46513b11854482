// Private to dlock::redis: one node's answer to the acquire script, read.
#pragma once

#include <string>

#include "reply.hpp"

namespace dlock::redis::detail {

/// One node's answer to the acquire script (scripts.hpp: acquire_script).
struct acquire_answer {
  /// wrong_type: a key of the name holds another type than the script expects (WRONGTYPE):
  /// in .NET's layout, a lock and a semaphore of one name (dotnet_layout.hpp).
  enum class kind { granted, taken, stale, other_max_count, wrong_type, failed };
  kind outcome = kind::failed;
  long long value = 0;  ///< token, ms to wait (-1: no expiry), counter, or stored max_count
  std::string failure;  ///< when failed: the connection failure or the server's error
};

/// Reads `result`; a reply of another shape is `failed`.
acquire_answer read_acquire_answer(const command_result& result);

}  // namespace dlock::redis::detail
