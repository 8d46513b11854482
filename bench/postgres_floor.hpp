// The PostgreSQL side of dlock-bench: the raw libpq floor and what many held locks cost.
#pragma once

#include <string>
#include <vector>

namespace bench {

/// `iterations` samples (us) of a raw libpq connection's `SELECT pg_try_advisory_lock(k)` and
/// `SELECT pg_advisory_unlock(k)`, the two round trips an uncontended grant needs.
std::vector<double> raw_libpq_floor(const std::string& url, int iterations);

/// `iterations` samples (us) of a raw `SELECT 1` round trip.
std::vector<double> raw_libpq_round_trip(const std::string& url, int iterations);

/// Sessions the server has for clients that set application_name `application`.
int server_sessions(const std::string& url, const std::string& application);

}  // namespace bench
