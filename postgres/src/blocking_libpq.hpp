// Private to dlock::postgres: libpq driven by the calling thread, every wait bounded by a
// deadline (poll(2) on the socket), for sessions whose callers block on them.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <libpq-fe.h>

#include "connection_string.hpp"
#include "pg_connection.hpp"

namespace dlock::postgres::detail {

/// A statement's parameter: text, or bytes sent as binary (any value, NUL bytes included).
struct board_parameter {
  std::string bytes;
  Oid type;  ///< bytea_oid (binary), bigint_oid or integer_oid (text)
};

/// The types a board_parameter may have (PostgreSQL's pg_type.dat).
inline constexpr Oid bytea_oid = 17, bigint_oid = 20, integer_oid = 23;

/// Opens a connection (in non-blocking mode, for send_blocking) by `deadline`; nullptr with
/// the reason in `why` when it cannot, and with `why` empty when the descriptor `wakeup`
/// (-1: none) became readable first (a stop request).
PGconn* connect_blocking(const connection_parameters& parameters, const std::string& endpoint,
                         std::chrono::steady_clock::time_point deadline, std::string& why,
                         int wakeup = -1);

/// Sends `sql` with `parameters` ($1, $2, ...; none: a simple query, which may hold several
/// statements) and waits for its results until `deadline`. A failed statement fills
/// sqlstate/message; a connection that broke or did not answer in time sets connection_broken
/// (the caller closes it: a late answer would be taken for the next statement's).
query_result send_blocking(PGconn* conn, const std::string& endpoint, const std::string& sql,
                           const std::vector<board_parameter>& parameters,
                           std::chrono::steady_clock::time_point deadline);

}  // namespace dlock::postgres::detail
