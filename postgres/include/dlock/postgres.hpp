// dlock/postgres.hpp: the PostgreSQL backend (dlock::postgres::provider and its key mapping).
#pragma once

#include <dlock/postgres/advisory_key.hpp>
#include <dlock/postgres/provider.hpp>
#include <dlock/postgres/transaction.hpp>
