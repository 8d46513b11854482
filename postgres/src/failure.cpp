#include "failure.hpp"

#include <dlock/core/errors.hpp>

namespace dlock::postgres::detail {

std::exception_ptr acquire_failure(const dlock::backend& backend, const query_result& result,
                                   std::string_view name) {
  const std::string& state = result.sqlstate;
  if (result.connection_broken || state.starts_with("08") || state.starts_with("57P") ||
      state.starts_with("28") || state == "3D000") {
    return std::make_exception_ptr(connection_error(backend.message(result.message, name)));
  }
  if (state == "40P01") {
    return std::make_exception_ptr(
        deadlock_error(backend.message("deadlock detected (40P01) waiting", name)));
  }
  return std::make_exception_ptr(
      dlock::error(backend.message("SQLSTATE " + state + ": " + result.message, name)));
}

}  // namespace dlock::postgres::detail
