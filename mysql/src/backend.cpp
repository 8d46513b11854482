#include "backend.hpp"

#include <stdexcept>

#include <boost/asio/post.hpp>
#include <errmsg.h>
#include <mysqld_error.h>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "acquire.hpp"
#include "lock_name.hpp"
#include "mariadb_exchange.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

std::string invalid(const char* field, const std::string& what) {
  return std::string("dlock: mysql: options.") + field + " " + what;
}

std::string endpoint_of(const options& opts) {
  if (!opts.host.empty() && opts.host.front() == '/') return opts.host;
  const bool v6 = opts.host.find(':') != std::string::npos;
  return (v6 ? "[" + opts.host + "]" : opts.host) + ":" + std::to_string(opts.port);
}

}  // namespace

mysql_backend::mysql_backend(options opts)
    : options_(std::move(opts)), endpoint_(endpoint_of(options_)) {
  initialize_client_library();
  using std::chrono::nanoseconds;
  auto require_positive = [](nanoseconds value, const char* field) {
    if (value <= nanoseconds::zero()) throw std::invalid_argument(invalid(field, "must be positive"));
  };
  if (options_.host.empty()) throw std::invalid_argument(invalid("host", "is empty"));
  require_positive(options_.connect_timeout, "connect_timeout");
  require_positive(options_.keepalive, "keepalive");
  require_positive(options_.semaphore_retry, "semaphore_retry");
  require_positive(options_.release_timeout, "release_timeout");
  if (options_.server_lease < nanoseconds::zero()) {
    throw std::invalid_argument(invalid("server_lease", "is negative"));
  }
  if (options_.server_lease == nanoseconds::zero()) options_.server_lease = 2 * options_.keepalive;
  if (options_.server_lease < options_.keepalive * 3 / 2) {
    throw std::invalid_argument(invalid(
        "server_lease", "must be at least 1.5 x keepalive (the client's lost bound)"));
  }
  if (options_.server_lease > std::chrono::hours(24 * 365)) {
    throw std::invalid_argument(invalid("server_lease", "is longer than a year"));
  }
  validate_object_name("fencing_sequence", options_.fencing_sequence);
  validate_object_name("semaphore_table", options_.semaphore_table);
  validate_object_name("election_table", options_.election_table);
  validate_object_name("grant_table", options_.grant_table);
  const auto needs_database = [&](const std::string& object) {
    return !object.empty() && options_.database.empty() &&
           object.find('.') == std::string::npos;
  };
  if (needs_database(options_.fencing_sequence)) {
    throw std::invalid_argument(invalid(
        "database", "is empty: the fencing sequence needs a database (or fencing_sequence "
                    "as schema.name, or empty for no fencing tokens)"));
  }
  if (needs_database(options_.semaphore_table)) {
    throw std::invalid_argument(invalid(
        "database", "is empty: the semaphore table needs a database (or semaphore_table "
                    "as schema.name, or empty for no max_count check)"));
  }
  if (needs_database(options_.election_table)) {
    throw std::invalid_argument(invalid(
        "database", "is empty: the election table needs a database (or election_table as "
                    "schema.name, or empty for no elections)"));
  }
  if (needs_database(options_.grant_table)) {
    throw std::invalid_argument(invalid(
        "database", "is empty: the grant table needs a database (or grant_table as "
                    "schema.name, or empty for no inspector)"));
  }
  statements_ = statement_settings_of(options_);
}

mysql_backend::~mysql_backend() {
  io().stop();
  if (pool_) pool_->close_all();
  if (callers_) callers_->close_all();
}

void mysql_backend::start() {
  std::weak_ptr<mysql_backend> weak = weak_from_this();
  pool_ = std::make_shared<session_pool>(
      io().executor(), options_, endpoint_, server_lease_sql(options_.server_lease),
      [weak](mariadb_connection& connection) {
        if (auto self = weak.lock()) self->connection_opened(connection);
      });
  keepalive_ = std::make_shared<session_keepalive<session_pool>>(
      io().executor(), pool_, options_.keepalive,
      [weak_pool = std::weak_ptr(pool_)](const std::shared_ptr<mysql_session>& session,
                                         dlock::detail::unique_function<void(bool)> answered) {
        if (auto pool = weak_pool.lock()) pool->probe(session, std::move(answered));
      });
  callers_ = std::make_shared<caller_sessions>(
      io().executor(),
      mariadb_caller_driver{io().executor(), options_, endpoint_,
                            [weak](st_mysql* conn, std::chrono::steady_clock::time_point deadline) {
                              auto self = weak.lock();
                              return self ? self->prepare_caller_session(conn, deadline)
                                          : std::string("the provider is gone");
                            }},
      caller_sessions::limits{options_.connect_timeout, options_.keepalive},
      [weak_pool = std::weak_ptr(pool_)](std::function<void(bool)> answered) {
        auto pool = weak_pool.lock();
        if (!pool) return;
        pool->session_for_attempt("")->connection->execute(
            "DO 1", [answered = std::move(answered)](query_result r) { answered(r.ok()); });
      });
  // The pool's ticks probe both, so that a silent server loses the handles of both kinds of
  // connection at the tick that fails the waits.
  keepalive_->also_on_tick([weak_callers = std::weak_ptr(callers_)] {
    if (auto callers = weak_callers.lock()) callers->tick();
  });
  keepalive_->start();
}

// The earlier silence of the pool's connections and of the caller-driven ones.
provider_health mysql_backend::health() const {
  if (!keepalive_) return {};
  return keepalive_health(*this, keepalive_->silent_since(), callers_->silent_since(),
                          options_.keepalive);
}

std::shared_ptr<acquire_operation> mysql_backend::start_acquire(acquire_request request,
                                                                acquire_completion done) {
  check_slot_count(request, max_semaphore_slots);
  auto op = std::make_shared<mysql_acquire>(shared_from_this(), std::move(request),
                                            std::move(done));
  // start() only queues a statement, whose result always comes later.
  start_on_io_thread([op] { op->start(); });
  return op;
}

// Every new connection first makes sure the fencing sequence and the semaphore table exist,
// until one has. Without the privilege to create them, an attempt fails naming the missing
// one.
void mysql_backend::connection_opened(mariadb_connection& connection) {
  const std::string sql = create_objects_sql(options_);
  if (sql.empty() || objects_created_) return;
  connection.execute(sql, [weak = weak_from_this()](query_result r) {
    if (auto backend = weak.lock()) backend->creation_answered(r);
  });
}

// What the pool's connections run first (session_pool.cpp, connection_opened), on the caller's
// thread.
std::string mysql_backend::prepare_caller_session(st_mysql* conn,
                                                  std::chrono::steady_clock::time_point deadline) {
  query_result r = exchange_blocking(conn, endpoint_, server_lease_sql(options_.server_lease),
                                     deadline);
  if (r.connection_broken) return r.message;
  if (!r.ok()) return "cannot set the server-side lease (" + r.message + ")";
  const std::string sql = create_objects_sql(options_);
  if (sql.empty() || objects_created_) return {};
  r = exchange_blocking(conn, endpoint_, sql, deadline);
  if (r.connection_broken) return r.message;
  creation_answered(r);
  return {};
}

// Records that the objects exist, or reports why they cannot be created.
void mysql_backend::creation_answered(const query_result& r) {
  if (r.ok()) {
    objects_created_ = true;
  } else if (!r.connection_broken) {
    events().background_error(std::make_exception_ptr(dlock::error(message(
        "cannot create the fencing sequence, semaphore, election or grant table (" + r.message +
        "); create them once (docs/mysql.md) and grant SELECT, INSERT on the sequence and "
        "SELECT, INSERT, UPDATE, DELETE on the tables to the lock users"))));
  }
}

std::exception_ptr mysql_backend::failure(const query_result& result,
                                          std::string_view name) const {
  const unsigned e = result.error;
  if (result.connection_broken || (e >= CR_MIN_ERROR && e <= CR_MAX_ERROR) ||
      e == ER_ACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR || e == ER_BAD_DB_ERROR ||
      e == ER_CON_COUNT_ERROR || e == ER_SERVER_SHUTDOWN) {
    return std::make_exception_ptr(connection_error(message(result.message, name)));
  }
  if (e == ER_LOCK_DEADLOCK) {
    return std::make_exception_ptr(
        deadlock_error(message("deadlock detected waiting (" + result.message + ")", name)));
  }
  return std::make_exception_ptr(
      dlock::error(message("error " + std::to_string(e) + ": " + result.message, name)));
}

}  // namespace dlock::mysql::detail
