#include "postgres_backend.hpp"

#include <algorithm>
#include <cctype>
#include <future>
#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/postgres/advisory_key.hpp>

#include "lock_timeout.hpp"

namespace dlock::postgres::detail {

namespace {

// Semaphores past this many slots would send very long slot lists with every attempt.
constexpr std::uint32_t max_semaphore_slots = 1000;

bool valid_sequence_name(const std::string& name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.';
  });
}

// The key every slot of a semaphore derives from; its slots are base, base+1, ...
advisory_key semaphore_base(const std::string& name) {
  return advisory_key::from_name("dlock-semaphore:" + name);
}

std::string channel_of(const std::string& name) { return "dlock_" + semaphore_base(name).name(); }

// Every holder of a semaphore slot also holds this shared key, which says which max_count it
// uses, so a mismatch can be seen in pg_locks. Its low 8 bits are 0x01: an ASCII-packed name
// always ends in 7 one bits (fewer than 9 characters) or a 0 bit (9), so no name maps here.
advisory_key max_count_marker(const std::string& name, std::uint32_t max_count) {
  return advisory_key(semaphore_base(name).high(), static_cast<std::int32_t>((max_count << 8) | 1));
}

// pg_locks columns of a key: a bigint is classid (high 32), objid (low 32), objsubid 1; a pair
// is classid (first), objid (second), objsubid 2.
std::string pg_locks_match(const advisory_key& key) {
  const auto bits = static_cast<std::uint64_t>(key.key());
  return "classid::bigint = " + std::to_string(bits >> 32) +
         " AND objid::bigint = " + std::to_string(bits & 0xffffffffu) +
         " AND objsubid = " + (key.is_pair() ? "2" : "1");
}

}  // namespace

bool pg_session::holds(const std::string& resource) const {
  return std::any_of(grants.begin(), grants.end(),
                     [&](const auto& entry) { return entry.second.resource == resource; });
}

bool pg_session::holds_or_attempts(const std::string& resource) const {
  return attempting.contains(resource) || holds(resource);
}

/// A grant on one session. release() may run on any thread.
class pg_lease final : public dlock::lease {
 public:
  pg_lease(std::shared_ptr<postgres_backend> backend, std::shared_ptr<pg_session> session,
           std::string unlock_sql, std::uint64_t fencing_token)
      : lease(fencing_token),
        backend_(std::move(backend)),
        session_(std::move(session)),
        unlock_sql_(std::move(unlock_sql)) {}

  void attach(std::uint64_t grant_id) { grant_id_ = grant_id; }

  ~pg_lease() override {
    if (!released_) release_in_background();
  }

  void release() override {
    released_ = true;
    // A lost lease's session is gone (the server freed the lock) or a hold limit releases it:
    // nothing to wait for, and the provider's thread may be busy.
    if (backend_->running_in_this_thread() || lost()) {
      release_in_background();
      return;
    }
    auto outcome = std::make_shared<std::promise<std::string>>();
    auto answer = outcome->get_future();
    boost::asio::post(backend_->executor(), [backend = backend_, session = session_,
                                             id = grant_id_, sql = unlock_sql_, outcome] {
      backend->release_grant(session, id, sql,
                             [outcome](std::string error) { outcome->set_value(error); });
    });
    const std::string where = "dlock: postgres " + backend_->endpoint() + ": ";
    if (answer.wait_for(backend_->settings().release_timeout) != std::future_status::ready) {
      throw connection_error(where + "no answer to the release in time");
    }
    if (std::string error = answer.get(); !error.empty()) {
      throw connection_error(where + "release failed: " + error);
    }
  }

 private:
  // From the io thread (a hold limit, a handler) or a destructor: nobody can wait for it.
  void release_in_background() noexcept {
    released_ = true;
    try {
      boost::asio::post(backend_->executor(), [backend = backend_, session = session_,
                                               id = grant_id_, sql = unlock_sql_] {
        backend->release_grant(session, id, sql, [backend](std::string error) {
          if (!error.empty()) {
            backend->events().background_error(std::make_exception_ptr(connection_error(
                "dlock: postgres " + backend->endpoint() + ": release failed: " + error)));
          }
        });
      });
    } catch (...) {
      backend_->events().background_error(std::current_exception());
    }
  }

  std::shared_ptr<postgres_backend> backend_;
  std::shared_ptr<pg_session> session_;
  std::string unlock_sql_;
  std::uint64_t grant_id_ = 0;
  bool released_ = false;
};

/// One acquire: an attempt on a shared session, then, if it must wait, a blocking
/// pg_advisory_lock on a session of its own (locks) or LISTEN and retries (semaphores).
/// Runs on the io thread except cancel().
class pg_acquire final : public acquire_operation,
                         public std::enable_shared_from_this<pg_acquire> {
 public:
  pg_acquire(std::shared_ptr<postgres_backend> backend, acquire_request request,
             acquire_completion done)
      : backend_(std::move(backend)), request_(std::move(request)), done_(std::move(done)),
        key_(request_.kind == primitive::semaphore ? semaphore_base(request_.name)
                                                   : advisory_key::from_name(request_.name)),
        resource_(request_.kind == primitive::semaphore ? "S" + channel_of(request_.name)
                                                        : "L" + key_.sql_arguments()),
        retry_timer_(backend_->executor()) {}

  void start() {
    session_ = backend_->session_for_attempt(resource_);
    session_->attempting.insert(resource_);
    session_->connection->execute(attempt_sql(), [self = shared_from_this()](query_result r) {
      // Answered: from here the grant (if any) is in the books, or the session is free of it.
      auto& attempting = self->session_->attempting;
      attempting.erase(attempting.find(self->resource_));
      self->attempted(std::move(r), false);
    });
  }

  void cancel() noexcept override {
    try {
      boost::asio::post(backend_->executor(), [self = shared_from_this()] { self->stop(); });
    } catch (...) {
    }
  }

  // Called by the backend when the semaphore's channel was notified.
  void notified() {
    if (phase_ == phase::listening) attempt_again();
  }

 private:
  enum class phase { attempting, waiting, listening, cleaning, done };

  bool shared_mode() const {
    return request_.kind == primitive::reader_writer_lock && request_.mode == lock_mode::shared;
  }
  std::string suffix() const { return shared_mode() ? "_shared" : ""; }

  std::string slot_array() const {
    std::string array = "ARRAY[";
    const auto base = static_cast<std::uint64_t>(key_.key());
    for (std::uint32_t i = 0; i < request_.max_count; ++i) {
      if (i) array += ',';
      array += std::to_string(static_cast<std::int64_t>(base + i));
    }
    return array + "]::bigint[]";
  }

  std::string attempt_sql() const {
    const std::string& token = backend_->token_expression();
    if (request_.kind == primitive::semaphore) {
      // LIMIT 1 stops the scan at the first slot obtained, so at most one is taken.
      return "SELECT slot, " + token + ", pg_advisory_lock_shared(" +
             max_count_marker(request_.name, request_.max_count).sql_arguments() +
             ") FROM (SELECT slot FROM unnest(" + slot_array() +
             ") AS slot WHERE pg_try_advisory_lock(slot) LIMIT 1) AS granted";
    }
    return "SELECT 0, CASE WHEN pg_try_advisory_lock" + suffix() + "(" + key_.sql_arguments() +
           ") THEN " + token + " END";
  }

  std::string unlock_sql(const std::string& slot) const {
    if (request_.kind == primitive::semaphore) {
      return "SELECT pg_advisory_unlock((" + slot + ")::bigint), pg_advisory_unlock_shared(" +
             max_count_marker(request_.name, request_.max_count).sql_arguments() +
             "), pg_notify('" + channel_of(request_.name) + "', '')";
    }
    return "SELECT pg_advisory_unlock" + suffix() + "(" + key_.sql_arguments() + ")";
  }

  std::string for_lock() const {
    return " for lock '" + naming::quote_for_message(request_.name) + "'";
  }

  std::exception_ptr failure(const query_result& r) const {
    const std::string where = "dlock: postgres " + backend_->endpoint() + ": ";
    if (r.connection_broken || r.sqlstate.starts_with("08") || r.sqlstate.starts_with("57P") ||
        r.sqlstate.starts_with("28") || r.sqlstate == "3D000") {
      return std::make_exception_ptr(connection_error(where + r.message + for_lock()));
    }
    if (r.sqlstate == "40P01") {
      return std::make_exception_ptr(
          deadlock_error(where + "deadlock detected (40P01) waiting" + for_lock()));
    }
    return std::make_exception_ptr(
        dlock::error(where + "SQLSTATE " + r.sqlstate + ": " + r.message + for_lock()));
  }

  // The first column names the slot (semaphores), the second is the token; NULL: not granted.
  void attempted(query_result r, bool on_own_session) {
    if (!r.ok()) {
      if (on_own_session) stop_listening();
      complete(failure(r), nullptr);
      return;
    }
    if (auto token = r.value(1)) {
      if (on_own_session) end_listening();
      grant(*r.value(0), std::stoull(*token));
      return;
    }
    if (stopped_ || !request_.wait) {
      if (on_own_session) stop_listening();
      complete(nullptr, nullptr);
      return;
    }
    if (request_.kind == primitive::semaphore) {
      if (!on_own_session) {
        backend_->events().acquire_waiting();
        listen();
      } else {
        wait_for_notification();
      }
      return;
    }
    backend_->events().acquire_waiting();
    wait_for_lock();
  }

  void grant(const std::string& slot, std::uint64_t token) {
    auto granted = std::make_unique<pg_lease>(backend_, session_, unlock_sql(slot), token);
    granted->attach(backend_->add_grant(*session_, resource_, granted->lost_signal()));
    if (own_session_) backend_->unreserve(session_);
    complete(nullptr, std::move(granted));
  }

  // Locks: a blocking pg_advisory_lock on a session that holds nothing, bounded by
  // lock_timeout at the deadline; stop() cancels the statement.
  void wait_for_lock() {
    session_ = backend_->session_for_wait();
    own_session_ = true;
    phase_ = phase::waiting;
    // statement_timeout off: a limit from the connection string must not end the wait early.
    std::string sql = "SET lock_timeout = " + std::to_string(lock_timeout_ms()) +
                      "; SET statement_timeout = 0; SELECT 0, " +
                      backend_->token_expression() + " FROM (SELECT pg_advisory_lock" + suffix() +
                      "(" + key_.sql_arguments() + ") OFFSET 0) AS granted";
    session_->connection->execute(std::move(sql), [self = shared_from_this()](query_result r) {
      self->waited(std::move(r));
    });
  }

  // At the deadline the server's lock_timeout ends the wait by itself, sooner than a
  // cancel request, which opens a connection of its own.
  bool deadline_passed() const {
    return request_.deadline != std::chrono::steady_clock::time_point::max() &&
           std::chrono::steady_clock::now() >= request_.deadline;
  }

  long long lock_timeout_ms() const {
    if (request_.deadline == std::chrono::steady_clock::time_point::max()) return 0;
    return detail::lock_timeout_ms(request_.deadline - std::chrono::steady_clock::now());
  }

  void waited(query_result r) {
    if (cancel_sent_) {
      // Our cancel request is delivered on a connection of its own and may land after this
      // statement ended, on whatever the session runs next; and a grant may have won the race.
      // Ending the session settles both: the server frees all it held.
      session_->connection->close();
      complete(nullptr, nullptr);
      return;
    }
    if (r.ok()) {
      grant("0", std::stoull(r.value(1).value_or("0")));
      return;
    }
    if (r.sqlstate == "55P03" || r.sqlstate == "57014") {
      release_granted_in_race();
      return;
    }
    if (r.connection_broken && stopped_) {
      complete(nullptr, nullptr);  // the session is gone, and with it anything it held
      return;
    }
    backend_->unreserve(session_);
    complete(failure(r), nullptr);
  }

  // The grant can come between the timeout or cancel and the error reaching us; a
  // session-level lock survives the failed statement, so look for it and let it go.
  void release_granted_in_race() {
    phase_ = phase::cleaning;  // a stop request must not cancel this statement
    std::string sql = "SELECT pg_advisory_unlock" + suffix() + "(" + key_.sql_arguments() +
                      ") FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = "
                      "pg_backend_pid() AND " +
                      pg_locks_match(key_);
    session_->connection->execute(std::move(sql), [self = shared_from_this()](query_result r) {
      if (r.ok()) {
        self->backend_->unreserve(self->session_);
      } else {
        self->session_->connection->close();  // it may hold the lock: ending it frees it
      }
      self->complete(nullptr, nullptr);
    });
  }

  // Semaphores: LISTEN on the name's channel on a session of our own, then attempt again on
  // each NOTIFY (every release sends one) and every semaphore_retry (a holder whose session
  // died sends none).
  void listen() {
    session_ = backend_->session_for_wait();
    own_session_ = true;
    phase_ = phase::attempting;
    backend_->add_notify_waiter(channel_of(request_.name), weak_from_this());
    session_->connection->execute(
        "LISTEN \"" + channel_of(request_.name) + "\"; " + attempt_sql(),
        [self = shared_from_this()](query_result r) { self->attempted(std::move(r), true); });
  }

  void wait_for_notification() {
    phase_ = phase::listening;
    retry_timer_.expires_after(backend_->settings().semaphore_retry);
    retry_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (!ec && self && self->phase_ == phase::listening) self->attempt_again();
    });
  }

  void attempt_again() {
    retry_timer_.cancel();
    phase_ = phase::attempting;
    session_->connection->execute(attempt_sql(), [self = shared_from_this()](query_result r) {
      self->attempted(std::move(r), true);
    });
  }

  void end_listening() {
    backend_->remove_notify_waiter(channel_of(request_.name), this);
    retry_timer_.cancel();
    if (!own_session_) return;
    session_->connection->execute("UNLISTEN \"" + channel_of(request_.name) + "\"",
                                  [](query_result) {});
  }

  // Ends a semaphore wait without a grant: the session goes back to the pool.
  void stop_listening() {
    end_listening();
    backend_->unreserve(session_);
  }

  void stop() {
    if (phase_ == phase::done) return;
    stopped_ = true;
    if (phase_ == phase::listening) {
      stop_listening();
      complete(nullptr, nullptr);
      return;
    }
    if (phase_ == phase::waiting && !deadline_passed()) {
      cancel_sent_ = session_->connection->cancel_running();
      if (!cancel_sent_) {
        // Still queued behind the connect: nothing was sent, so closing the session is clean.
        session_->connection->close();
        return;
      }
    }
    // A server that does not answer (paused, unreachable) ends neither the statement by itself
    // nor on the cancel: give the session up after connect_timeout. The server frees what it
    // held, and every handle on it is marked lost (nobody can vouch for them).
    retry_timer_.expires_after(backend_->settings().connect_timeout);
    retry_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (!ec && self && self->phase_ != phase::done) {
        self->session_->connection->abandon("no answer within connect_timeout after a stop");
      }
    });
  }

  void complete(std::exception_ptr error, std::unique_ptr<lease> granted) {
    if (phase_ == phase::done) return;
    phase_ = phase::done;
    retry_timer_.cancel();
    auto done = std::move(done_);
    done(std::move(error), std::move(granted));
  }

  std::shared_ptr<postgres_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  advisory_key key_;
  std::string resource_;
  std::shared_ptr<pg_session> session_;
  bool own_session_ = false;
  bool stopped_ = false;
  bool cancel_sent_ = false;
  phase phase_ = phase::attempting;
  boost::asio::steady_timer retry_timer_;
};

std::string describe_connection_string(const std::string& connection_string) {
  if (connection_string.empty()) {
    throw std::invalid_argument("dlock: postgres: options.connection_string is empty");
  }
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(connection_string.c_str(), &error);
  if (!parsed) {
    // libpq's message may quote pieces of the string, which may hold a password.
    if (error) PQfreemem(error);
    throw std::invalid_argument(
        "dlock: postgres: options.connection_string is not a valid libpq URL or key=value "
        "connection string");
  }
  std::string host, port, dbname, user;
  for (PQconninfoOption* option = parsed; option->keyword; ++option) {
    if (!option->val) continue;
    const std::string keyword = option->keyword;
    if (keyword == "host" || (keyword == "hostaddr" && host.empty())) host = option->val;
    if (keyword == "port") port = option->val;
    if (keyword == "dbname") dbname = option->val;
    if (keyword == "user") user = option->val;
  }
  PQconninfoFree(parsed);
  std::string endpoint = host.empty() ? "localhost" : host;
  if (!port.empty()) endpoint += ":" + port;
  if (!dbname.empty()) endpoint += "/" + dbname;
  return (user.empty() ? "" : user + "@") + endpoint;
}

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
  if (!options_.fencing_sequence.empty() && !valid_sequence_name(options_.fencing_sequence)) {
    throw std::invalid_argument(
        "dlock: postgres: options.fencing_sequence '" + options_.fencing_sequence +
        "' is not a plain [schema.]name of letters, digits and '_'");
  }
  token_expression_ = options_.fencing_sequence.empty()
                          ? "0"
                          : "nextval('" + options_.fencing_sequence + "')";
  // TCP keepalives at the keepalive period bound how long a wait on a silent network lasts
  // (the wait's session runs no keepalive queries). Before dbname, so that the connection
  // string's own settings win.
  const auto tcp_seconds = std::to_string(std::max<long long>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.keepalive).count()));
  parameters_.keywords = {"keepalives_idle", "keepalives_interval", "keepalives_count", "dbname",
                          "fallback_application_name"};
  parameters_.values = {tcp_seconds, tcp_seconds, "3", options_.connection_string, "dlock"};
  for (std::size_t i = 0; i < parameters_.keywords.size(); ++i) {
    keyword_pointers_.push_back(parameters_.keywords[i].c_str());
    value_pointers_.push_back(parameters_.values[i].c_str());
  }
  keyword_pointers_.push_back(nullptr);
  value_pointers_.push_back(nullptr);
}

postgres_backend::~postgres_backend() {
  io().stop();
  for (auto& session : sessions_) session->connection->close();
}

void postgres_backend::start() {
  keepalive_timer_.emplace(io().executor());
  boost::asio::post(io().executor(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->schedule_keepalive();
  });
}

std::shared_ptr<acquire_operation> postgres_backend::start_acquire(acquire_request request,
                                                                   acquire_completion done) {
  if (request.kind == primitive::semaphore && request.max_count > max_semaphore_slots) {
    throw std::invalid_argument("dlock: postgres " + endpoint_ + ": max_count " +
                                std::to_string(request.max_count) + " of semaphore '" +
                                naming::quote_for_message(request.name) + "' exceeds " +
                                std::to_string(max_semaphore_slots));
  }
  auto op = std::make_shared<pg_acquire>(shared_from_this(), std::move(request), std::move(done));
  // Core calls from the io thread, where start() may run at once: it only queues a statement,
  // whose result always comes later, so `done` never runs inside this call.
  if (io().running_in_this_thread()) {
    op->start();
  } else {
    boost::asio::post(io().executor(), [op] { op->start(); });
  }
  return op;
}

std::optional<std::uint32_t> postgres_backend::current_count(const acquire_request& request) {
  if (running_in_this_thread()) {
    throw std::logic_error("dlock: postgres current_count() on the provider's own thread would "
                           "wait for itself");
  }
  const auto base = static_cast<std::uint64_t>(semaphore_base(request.name).key());
  std::string slots;
  for (std::uint32_t i = 0; i < request.max_count; ++i) {
    if (i) slots += ',';
    slots += std::to_string(static_cast<std::int64_t>(base + i));
  }
  // A bigint key is classid (high 32 bits) and objid (low 32 bits).
  const auto marker = max_count_marker(request.name, request.max_count);
  std::string sql =
      "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
      "objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = ANY(ARRAY[" +
      slots +
      "]::bigint[])), (SELECT objid::bigint >> 8 FROM pg_locks WHERE locktype = 'advisory' "
      "AND granted AND objsubid = 2 AND classid::bigint = " +
      std::to_string(static_cast<std::uint32_t>(marker.high())) +
      " AND objid::bigint & 255 = 1 AND objid::bigint <> " +
      std::to_string(static_cast<std::uint32_t>(marker.low())) + " LIMIT 1)";
  auto answer = std::make_shared<std::promise<query_result>>();
  auto future = answer->get_future();
  boost::asio::post(io().executor(), [self = shared_from_this(), sql, answer] {
    self->session_for_attempt("")->connection->execute(
        sql, [answer](query_result r) { answer->set_value(std::move(r)); });
  });
  if (future.wait_for(options_.release_timeout) != std::future_status::ready) {
    throw connection_error("dlock: postgres " + endpoint_ +
                           ": no answer in time counting the slots of semaphore '" +
                           naming::quote_for_message(request.name) + "'");
  }
  query_result r = future.get();
  if (!r.ok()) {
    throw connection_error("dlock: postgres " + endpoint_ + ": " + r.message +
                           " counting the slots of semaphore '" +
                           naming::quote_for_message(request.name) + "'");
  }
  if (auto other = r.value(1)) {
    throw max_count_mismatch(request, std::stoull(*other));
  }
  const auto held = std::stoul(r.value().value_or("0"));
  return held >= request.max_count ? 0 : request.max_count - static_cast<std::uint32_t>(held);
}

std::shared_ptr<pg_session> postgres_backend::open_session() {
  auto session = std::make_shared<pg_session>();
  session->connection = std::make_shared<pg_connection>(io().executor(), endpoint_);
  std::weak_ptr<postgres_backend> weak_backend = weak_from_this();
  std::weak_ptr<pg_session> weak_session = session;
  session->connection->connect(
      keyword_pointers_.data(), value_pointers_.data(), options_.connect_timeout,
      [weak_backend, weak_session] {
        auto backend = weak_backend.lock();
        auto broken = weak_session.lock();
        if (backend && broken) backend->session_broken(broken);
      },
      [weak_backend](const std::string& channel) {
        if (auto backend = weak_backend.lock()) backend->notified(channel);
      });
  if (!options_.fencing_sequence.empty() && !fencing_sequence_created_) {
    session->connection->execute(
        "CREATE SEQUENCE IF NOT EXISTS " + options_.fencing_sequence,
        [weak_backend, sequence = options_.fencing_sequence](query_result r) {
          auto backend = weak_backend.lock();
          if (!backend) return;
          // 42P07/23505: another client created it at the same moment.
          if (r.ok() || r.sqlstate == "42P07" || r.sqlstate == "23505") {
            backend->fencing_sequence_created_ = true;
          } else if (!r.connection_broken) {
            backend->events().background_error(std::make_exception_ptr(dlock::error(
                "dlock: postgres " + backend->endpoint_ + ": cannot create the fencing sequence " +
                sequence + " (" + r.message +
                "); create it once with CREATE SEQUENCE and GRANT USAGE to the lock users")));
          }
        });
  }
  sessions_.push_back(session);
  return session;
}

// Broken sessions have had their leases marked lost already (session_broken); a session
// that failed to connect or was closed during a cancelled wait just goes.
void postgres_backend::forget_broken_sessions() {
  std::erase_if(sessions_, [](const auto& s) { return s->connection->broken(); });
}

std::shared_ptr<pg_session> postgres_backend::session_for_attempt(const std::string& resource) {
  forget_broken_sessions();
  for (auto& session : sessions_) {
    const bool full = options_.locks_per_session != 0 &&
                      session->grants.size() >= options_.locks_per_session;
    if (!session->reserved && !session->connection->broken() && !full &&
        !session->holds_or_attempts(resource)) {
      return session;
    }
  }
  return open_session();
}

std::shared_ptr<pg_session> postgres_backend::session_for_wait() {
  forget_broken_sessions();
  for (auto& session : sessions_) {
    if (!session->reserved && !session->connection->broken() && session->grants.empty() &&
        !session->connection->busy()) {
      session->reserved = true;
      return session;
    }
  }
  auto session = open_session();
  session->reserved = true;
  return session;
}

void postgres_backend::unreserve(const std::shared_ptr<pg_session>& session) {
  session->reserved = false;
  retire_if_spare(session);
}

// One session that holds nothing is kept for the next acquire; more are closed.
void postgres_backend::retire_if_spare(const std::shared_ptr<pg_session>& session) {
  if (session->reserved || !session->grants.empty() || session->connection->busy()) return;
  const bool another_spare = std::any_of(sessions_.begin(), sessions_.end(), [&](const auto& s) {
    return s != session && !s->reserved && s->grants.empty() && !s->connection->broken();
  });
  if (!another_spare) return;
  std::erase(sessions_, session);
  session->connection->close();
}

std::uint64_t postgres_backend::add_grant(pg_session& session, std::string resource,
                                          std::stop_source lost) {
  const std::uint64_t id = next_grant_id_++;
  session.grants.emplace(id, pg_session::grant{std::move(resource), std::move(lost)});
  return id;
}

void postgres_backend::release_grant(std::shared_ptr<pg_session> session, std::uint64_t grant_id,
                                     std::string unlock_sql,
                                     std::function<void(std::string error)> done) {
  session->grants.erase(grant_id);
  if (session->connection->broken()) {
    done({});  // the session ended, and the server freed its locks with it
    return;
  }
  session->connection->execute(
      std::move(unlock_sql),
      [weak = weak_from_this(), session, done = std::move(done)](query_result r) {
        if (!r.ok() && !r.connection_broken) {
          // The lock may still be held by the session, but no longer in our books: end the
          // session, which frees it and marks the session's other handles lost.
          session->connection->abandon("an unlock failed: " + r.message);
          done(r.message);
          return;
        }
        if (auto self = weak.lock()) self->retire_if_spare(session);
        done({});
      });
}

void postgres_backend::session_broken(const std::shared_ptr<pg_session>& session) {
  std::erase(sessions_, session);
  std::vector<std::stop_source> lost;
  for (auto& [id, grant] : session->grants) lost.push_back(grant.lost);
  // Leases stay attached until released: a release on a broken session is a no-op.
  for (auto& signal : lost) signal.request_stop();
}

void postgres_backend::add_notify_waiter(const std::string& channel,
                                         std::weak_ptr<pg_acquire> waiter) {
  notify_waiters_.emplace(channel, std::move(waiter));
}

void postgres_backend::remove_notify_waiter(const std::string& channel,
                                            const pg_acquire* waiter) {
  auto [first, last] = notify_waiters_.equal_range(channel);
  for (auto it = first; it != last; ++it) {
    auto locked = it->second.lock();
    if (!locked || locked.get() == waiter) {
      notify_waiters_.erase(it);
      return;
    }
  }
}

void postgres_backend::notified(const std::string& channel) {
  std::vector<std::shared_ptr<pg_acquire>> waiting;
  auto [first, last] = notify_waiters_.equal_range(channel);
  for (auto it = first; it != last; ++it) {
    if (auto waiter = it->second.lock()) waiting.push_back(std::move(waiter));
  }
  for (auto& waiter : waiting) waiter->notified();
}

// Ticks twice a period, so a probe is judged no later than half a period after it has gone
// unanswered for a whole one: a break is noticed at most one and a half periods after it
// happened.
void postgres_backend::schedule_keepalive() {
  keepalive_timer_->expires_after(options_.keepalive / 2);
  keepalive_timer_->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->keepalive();
    self->schedule_keepalive();
  });
}

// A session whose probe has gone unanswered for a whole period is given up: its locks may be
// gone already, and the holders must hear it. Probes also go to a session that holds nothing
// but runs a statement (an attempt): queued behind it, the probe is answered only once the
// statement is, so an attempt the server never answers ends as a broken session instead of
// hanging. Reserved sessions are left alone: their blocking wait may rightly run for long
// (TCP keepalives bound it).
void postgres_backend::keepalive() {
  const auto now = std::chrono::steady_clock::now();
  auto sessions = sessions_;
  for (auto& session : sessions) {
    if (session->reserved || session->connection->broken()) continue;
    if (session->probe_sent) {
      if (now - *session->probe_sent >= options_.keepalive) {
        session->connection->abandon("no answer to the keepalive within one period");
      }
      continue;
    }
    if (session->grants.empty() && !session->connection->busy()) continue;
    session->probe_sent = now;
    session->connection->execute("SELECT 1", [weak = weak_from_this(), session](query_result) {
      session->probe_sent.reset();
      if (auto self = weak.lock()) self->retire_if_spare(session);
    });
  }
}

}  // namespace dlock::postgres::detail
