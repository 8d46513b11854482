#include "acquire_answer.hpp"

namespace dlock::redis::detail {

acquire_answer read_acquire_answer(const command_result& result) {
  if (result.failure) return {.failure = *result.failure};
  if (result.value.is_error() && result.value.text.find("WRONGTYPE") != std::string::npos) {
    return {acquire_answer::kind::wrong_type, 0, result.value.text};
  }
  if (!result.value.is_integer_pair()) {
    return {.failure = result.value.is_error() ? result.value.text
                                               : "unexpected reply to the acquire script"};
  }
  const long long status = result.value.elements[0].integer;
  const long long value = result.value.elements[1].integer;
  switch (status) {
    case 1: return {acquire_answer::kind::granted, value, {}};
    case 0: return {acquire_answer::kind::taken, value, {}};
    case -1: return {acquire_answer::kind::stale, value, {}};
    case -2: return {acquire_answer::kind::other_max_count, value, {}};
    default: return {.failure = "unexpected reply to the acquire script"};
  }
}

}  // namespace dlock::redis::detail
