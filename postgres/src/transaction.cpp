#include <dlock/postgres/transaction.hpp>

#include <stdexcept>
#include <string>

#include <pqxx/pqxx>

#include <dlock/core/errors.hpp>
#include <dlock/core/backend/naming.hpp>

#include "lock_timeout.hpp"

namespace dlock::postgres {

namespace {

std::string quoted_setting(pqxx::dbtransaction& transaction, const char* setting) {
  return transaction.quote(
      transaction.exec1(std::string("SELECT current_setting('") + setting + "')")[0]
          .as<std::string>());
}

// The dlock error for the pqxx::failure being handled (55P03, a timeout, is handled before).
[[noreturn]] void rethrow_as_dlock(const advisory_key& key) {
  const std::string where = "dlock: postgres transaction lock " + key.name() + ": ";
  try {
    throw;
  } catch (const pqxx::deadlock_detected& e) {
    // libpqxx 6.4 derives it from pqxx::failure, not sql_error.
    throw deadlock_error(where + "deadlock detected (40P01): " + e.what());
  } catch (const pqxx::broken_connection& e) {
    throw connection_error(where + "connection broken: " + e.what());
  } catch (const pqxx::sql_error& e) {
    throw dlock::error(where + "SQLSTATE " + e.sqlstate() + ": " + e.what());
  } catch (const pqxx::failure& e) {
    throw dlock::error(where + e.what());
  }
}

}  // namespace

bool try_lock_in_transaction(pqxx::dbtransaction& transaction, const advisory_key& key,
                             std::chrono::nanoseconds timeout, lock_mode mode) {
  if (timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: negative timeout for transaction lock " + key.name());
  }
  const std::string shared = mode == lock_mode::shared ? "_shared" : "";
  try {
    if (timeout == std::chrono::nanoseconds::zero()) {
      return transaction
          .exec1("SELECT pg_try_advisory_xact_lock" + shared + "(" + key.sql_arguments() + ")")[0]
          .as<bool>();
    }
    const std::string lock_timeout = quoted_setting(transaction, "lock_timeout");
    const std::string statement_timeout = quoted_setting(transaction, "statement_timeout");
    const long long milliseconds =
        timeout == std::chrono::nanoseconds::max() ? 0 : detail::lock_timeout_ms(timeout);
    // A failed statement aborts the transaction; the savepoint keeps it usable, and rolling
    // back to it also undoes the two settings.
    pqxx::subtransaction wait(transaction, "dlock_lock_in_transaction");
    try {
      wait.exec("SET LOCAL lock_timeout = " + std::to_string(milliseconds) +
                "; SET LOCAL statement_timeout = 0");
      wait.exec("SELECT pg_advisory_xact_lock" + shared + "(" + key.sql_arguments() + ")");
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != "55P03") throw;
      wait.abort();
      return false;
    }
    wait.exec("SELECT set_config('lock_timeout', " + lock_timeout +
              ", true), set_config('statement_timeout', " + statement_timeout + ", true)");
    wait.commit();
    return true;
  } catch (const pqxx::failure&) {
    rethrow_as_dlock(key);
  }
}

void lock_in_transaction(pqxx::dbtransaction& transaction, std::string_view name,
                         std::chrono::nanoseconds timeout, lock_mode mode) {
  naming::validate_name(name);
  if (!try_lock_in_transaction(transaction, advisory_key::from_name(name), timeout, mode)) {
    throw timeout_error("dlock: postgres transaction lock '" + naming::quote_for_message(name) +
                        "': not obtained in time");
  }
}

}  // namespace dlock::postgres
