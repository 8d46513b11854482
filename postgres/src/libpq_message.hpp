// Private to dlock::postgres: libpq's error text as one line that says each thing once.
#pragma once

#include <string>

namespace dlock::postgres::detail {

/// libpq's connection error `text` (PQerrorMessage) for a dlock message, which names the
/// endpoint already. libpq 15 writes one "connection to server at "host" (address), port N
/// failed: why" per address and attempt, so the same reason comes twice for a name with two
/// addresses (localhost: ::1 and 127.0.0.1) or for sslmode=prefer's TLS try and plain try.
/// Each reason is kept once, in order, its lines joined; where the reasons differ, each
/// says where it came from. Text of another shape is kept, trimmed to one line.
std::string libpq_message(const char* text);

}  // namespace dlock::postgres::detail
