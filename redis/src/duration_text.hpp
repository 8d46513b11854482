// A duration as error messages print it: "1500 ms".
#pragma once

#include <chrono>
#include <string>

namespace dlock::redis::detail {

inline std::string milliseconds_text(std::chrono::nanoseconds duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()) +
         " ms";
}

}  // namespace dlock::redis::detail
