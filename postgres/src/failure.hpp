// Private to dlock::postgres: a failed statement as the dlock error it stands for.
#pragma once

#include <exception>
#include <string_view>

#include <dlock/core/backend/backend.hpp>

#include "pg_connection.hpp"

namespace dlock::postgres::detail {

/// The error of an acquire of lock `name` whose statement failed with `result`:
/// connection_error for a lost or refused session (SQLSTATE classes 08, 57P, 28, and 3D000),
/// deadlock_error for 40P01, dlock::error with the SQLSTATE for anything else.
std::exception_ptr acquire_failure(const dlock::backend& backend, const query_result& result,
                                   std::string_view name);

}  // namespace dlock::postgres::detail
