#include "backend.hpp"

#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "acquire.hpp"
#include "connection_string.hpp"
#include "fencing.hpp"
#include "server_lease.hpp"
#include "semaphore_keys.hpp"
#include "sql.hpp"

namespace dlock::postgres::detail {

postgres_backend::postgres_backend(options opts)
    : options_(std::move(opts)), endpoint_(describe_connection_string(options_.connection_string)) {
  auto require_positive = [](std::chrono::nanoseconds value, const char* field) {
    if (value <= std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument(std::string("dlock: postgres: options.") + field +
                                  " must be positive");
    }
  };
  require_positive(options_.connect_timeout, "connect_timeout");
  require_positive(options_.keepalive, "keepalive");
  require_positive(options_.semaphore_retry, "semaphore_retry");
  require_positive(options_.release_timeout, "release_timeout");
  validate_fencing_sequence(options_.fencing_sequence);
  token_expression_ = fencing_token_expression(options_.fencing_sequence);
  validate_owners_table(options_.owners_table);
  owners_ = {options_.owners_table};
  const auto lease = server_lease::from(options_);
  session_setup_ = {lease.sql(), lease.optional_sql()};
}

postgres_backend::~postgres_backend() {
  io().stop();
  if (pool_) pool_->close_all();
  if (callers_) callers_->close_all();
}

void postgres_backend::start() {
  std::weak_ptr<postgres_backend> weak = weak_from_this();
  cancel_by_control_ = control_canceller(options_, endpoint_);
  session_pool::hooks hooks{
      .opened = [weak](pg_connection& connection) {
        if (auto self = weak.lock()) self->session_opened(connection);
      },
      .notified = [weak](const std::string& channel) {
        if (auto self = weak.lock()) self->waiters_.notify(channel);
      },
      .cancel = cancel_by_control_};
  pool_ = std::make_shared<session_pool>(io().executor(), options_, endpoint_,
                                         session_setup_, std::move(hooks));
  keepalive_ = std::make_shared<session_keepalive<session_pool>>(
      io().executor(), pool_, options_.keepalive,
      [](const std::shared_ptr<pg_session>& session,
         dlock::detail::unique_function<void(bool)> answered) {
        session->connection->execute(
            "SELECT 1", [answered = std::move(answered)](query_result r) mutable {
              answered(r.ok());
            });
      });
  keepalive_->start();
  callers_ = std::make_shared<caller_sessions>(
      io().executor(),
      pg_caller_driver{io().executor(), std::make_shared<const connection_parameters>(options_),
                       endpoint_,
                       [this](PGconn* conn, std::chrono::steady_clock::time_point deadline,
                              std::string& backend_start) {
                         return prepare_caller_session(conn, deadline, backend_start);
                       }},
      caller_sessions::limits{options_.connect_timeout, options_.keepalive,
                              options_.locks_per_session},
      [weak](std::function<void(bool)> answered) {
        auto self = weak.lock();
        if (!self) return;
        self->pool_->session_for_attempt("")->connection->execute(
            "SELECT 1", [answered = std::move(answered)](query_result r) { answered(r.ok()); });
      });
  callers_->start();
}

std::shared_ptr<acquire_operation> postgres_backend::start_acquire(acquire_request request,
                                                                   acquire_completion done) {
  check_slot_count(request, max_semaphore_slots);
  auto op = std::make_shared<pg_acquire>(shared_from_this(), std::move(request), std::move(done));
  // start() only queues a statement, whose result always comes later.
  start_on_io_thread([op] { op->start(); });
  return op;
}

// The earlier silence of the pool's sessions and of the caller-driven ones.
provider_health postgres_backend::health() const {
  if (!keepalive_) return {};
  return keepalive_health(*this, keepalive_->silent_since(), callers_->silent_since(),
                          options_.keepalive);
}

std::optional<std::uint32_t> postgres_backend::current_count(const acquire_request& request) {
  if (running_in_this_thread()) {
    throw std::logic_error("dlock: postgres current_count() on the provider's own thread would "
                           "wait for itself");
  }
  const std::string of_semaphore =
      " counting the slots of semaphore '" + naming::quote_for_message(request.name) + "'";
  query_result r = call_and_wait<query_result>(
      executor(), options_.release_timeout, message("no answer in time" + of_semaphore),
      [self = shared_from_this(), sql = count_slots_sql(request.name, request.max_count)](
          const blocking_reply<query_result>& reply) {
        self->pool_->session_for_attempt("")->connection->execute(
            sql, [reply](query_result r) { reply.set_value(std::move(r)); });
      });
  if (!r.ok()) throw connection_error(message(r.message + of_semaphore));
  if (auto other = r.value(1)) {
    throw max_count_mismatch(request, std::stoull(*other));
  }
  const auto held = std::stoul(r.value().value_or("0"));
  return held >= request.max_count ? 0 : request.max_count - static_cast<std::uint32_t>(held);
}

// Every new session first makes sure that the fencing sequence and the owners' table exist,
// until one has.
std::vector<postgres_backend::creation> postgres_backend::creations_needed() const {
  std::vector<creation> needed;
  if (!options_.fencing_sequence.empty() && !fencing_sequence_created_) {
    needed.push_back({&postgres_backend::fencing_sequence_created_,
                      create_fencing_sequence_sql(options_.fencing_sequence),
                      "the fencing sequence " + options_.fencing_sequence});
  }
  if (!owners_.table.empty() && !owners_table_created_) {
    needed.push_back({&postgres_backend::owners_table_created_,
                      create_owners_table_sql(owners_.table),
                      "the owners' table " + owners_.table});
  }
  return needed;
}

// 42P07/23505: another client created it at the same moment, and committed.
void postgres_backend::creation_answered(const creation& done, const query_result& r) {
  if (r.ok() || r.sqlstate == "42P07" || r.sqlstate == "23505") {
    (this->*done.created) = true;
  } else if (!r.connection_broken) {
    events().background_error(std::make_exception_ptr(dlock::error(
        message("cannot create " + done.what + " (" + r.message + "); create it once "
                "as docs/postgres.md shows and grant it to the lock users"))));
  }
}

void postgres_backend::session_opened(pg_connection& connection) {
  for (auto& needed : creations_needed()) {
    auto sql = needed.sql;
    connection.execute(std::move(sql), [weak = weak_from_this(),
                                        needed = std::move(needed)](query_result r) {
      if (auto backend = weak.lock()) backend->creation_answered(needed, r);
    });
  }
}

}  // namespace dlock::postgres::detail
