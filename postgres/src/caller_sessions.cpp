#include "caller_sessions.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

#include "blocking_libpq.hpp"
#include "libpq_message.hpp"

namespace dlock::postgres::detail {

namespace {

query_result broken_result(std::string message) {
  query_result r;
  r.connection_broken = true;
  r.message = std::move(message);
  return r;
}

}  // namespace

void drop_socket(caller_session& session) noexcept {
  if (!session.socket) return;
  boost::system::error_code ignored;
  session.socket->cancel(ignored);
  session.socket->release();  // libpq owns the descriptor
  session.socket.reset();
}

void signal_all(std::vector<std::stop_source>& lost) {
  for (auto& signal : lost) signal.request_stop();
}

caller_session::~caller_session() {
  drop_socket(*this);
  if (conn) PQfinish(conn);
}

caller_sessions::caller_sessions(boost::asio::any_io_executor executor, const options& opts,
                                 std::string endpoint, preparer prepare,
                                 other_prober probe_elsewhere)
    : executor_(std::move(executor)), endpoint_(std::move(endpoint)), parameters_(opts),
      connect_timeout_(opts.connect_timeout), keepalive_(opts.keepalive),
      locks_per_session_(opts.locks_per_session), prepare_(std::move(prepare)),
      probe_elsewhere_(std::move(probe_elsewhere)), timer_(executor_), sweep_timer_(executor_) {}

std::optional<std::chrono::steady_clock::time_point> caller_sessions::silent_since()
    const noexcept {
  const std::int64_t since = silent_since_.load(std::memory_order_relaxed);
  if (since == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since));
}

void caller_sessions::start() {
  boost::asio::post(executor_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->schedule();
  });
}

caller_sessions::session_ptr caller_sessions::check_out(const std::string& resource,
                                                        std::string& why, int wakeup) {
  return check_out_where(
      [&](const caller_session& session) {
        const bool full =
            locks_per_session_ != 0 && session.grants.size() >= locks_per_session_;
        return !full && !session.grants.holds(resource);
      },
      why, wakeup);
}

caller_sessions::session_ptr caller_sessions::check_out_for_wait(std::string& why, int wakeup) {
  return check_out_where([](const caller_session& session) { return session.grants.empty(); },
                         why, wakeup);
}

caller_sessions::session_ptr caller_sessions::check_out_where(
    const std::function<bool(const caller_session&)>& usable, std::string& why, int wakeup) {
  {
    std::unique_lock lock(mutex_);
    const auto stop_waiting =
        std::chrono::steady_clock::now() + std::min(connect_timeout_, keepalive_);
    while (true) {
      bool probed = false;
      for (auto& session : sessions_) {
        if (session->broken || !usable(*session)) continue;
        if (session->in_use) {
          probed = probed || session->probing;
          continue;
        }
        session->in_use = true;
        return session;
      }
      // A probe takes one round trip: waiting for it is cheaper than a new session, unless
      // the server does not answer it in time (then the new session's connect fails too).
      if (!probed || std::chrono::steady_clock::now() >= stop_waiting) break;
      returned_.wait_until(lock, stop_waiting);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + connect_timeout_;
  PGconn* conn = connect_blocking(parameters_, endpoint_, deadline, why, wakeup);
  if (!conn) return nullptr;
  std::string backend_start;
  if (why = prepare_(conn, deadline, backend_start); !why.empty()) {
    PQfinish(conn);
    return nullptr;
  }
  silent_since_.store(0, std::memory_order_relaxed);  // the server answered the setup
  heard();
  auto session = std::make_shared<caller_session>();
  session->conn = conn;
  session->pid = PQbackendPID(conn);
  session->backend_start = std::move(backend_start);
  session->in_use = true;
  std::lock_guard lock(mutex_);
  sessions_.push_back(session);
  return session;
}

void caller_sessions::heard() noexcept {
  heard_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
               std::memory_order_relaxed);
}

void caller_sessions::wait_began() { waits_.fetch_add(1, std::memory_order_relaxed); }

void caller_sessions::wait_ended() noexcept { waits_.fetch_sub(1, std::memory_order_relaxed); }

bool caller_sessions::silent_for_wait(std::chrono::steady_clock::time_point since) const noexcept {
  const std::chrono::steady_clock::time_point heard(
      std::chrono::steady_clock::duration(heard_.load(std::memory_order_relaxed)));
  return std::chrono::steady_clock::now() - std::max(heard, since) >= keepalive_;
}

void caller_sessions::check_in(const session_ptr& session) {
  {
    std::lock_guard lock(mutex_);
    check_in_locked(session);
  }
  returned_.notify_all();
}

// A session that holds grants is watched from the next sweep, a moment later: most grants of a
// busy caller are released before it, and a watch costs the io thread a wake-up when it is
// armed and another when the caller's own traffic comes, beside the caller's round trips.
void caller_sessions::check_in_locked(const session_ptr& session) {
  session->in_use = false;
  if (session->broken || session->watched || session->grants.empty() || sweep_pending_) return;
  sweep_pending_ = true;
  boost::asio::post(executor_, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->sweep_timer_.expires_after(watch_delay);
    self->sweep_timer_.async_wait([weak = self->weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->sweep();
    });
  });
}

void caller_sessions::sweep() {
  std::vector<session_ptr> unwatched;
  {
    std::lock_guard lock(mutex_);
    sweep_pending_ = false;
    for (auto& session : sessions_) {
      if (session->broken || session->in_use || session->watched || session->grants.empty()) {
        continue;  // one in use is swept again once it is checked in
      }
      session->watched = true;
      unwatched.push_back(session);
    }
  }
  for (auto& session : unwatched) watch(session);
}

std::vector<std::stop_source> caller_sessions::break_locked(caller_session& session) {
  session.broken = true;
  session.in_use = false;
  session.probing = false;
  std::vector<std::stop_source> lost;
  for (const auto& [id, grant] : session.grants) lost.push_back(grant.lost);
  return lost;
}

void caller_sessions::give_up(const session_ptr& session) {
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    lost = break_locked(*session);
    std::erase(sessions_, session);
  }
  returned_.notify_all();
  close_on_io(session);
  signal_all(lost);
}

// Closing the socket is what makes the server end the session and free its locks. On the io
// thread, which may be waiting on that socket.
void caller_sessions::close_on_io(const session_ptr& session) {
  boost::asio::post(executor_, [session] {
    drop_socket(*session);
    if (session->conn) PQfinish(session->conn);
    session->conn = nullptr;
  });
}

std::uint64_t caller_sessions::add_grant(caller_session& session, caller_session::grant grant) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_grant_id_++;
  session.grants.emplace(id, std::move(grant));
  return id;
}

std::string caller_sessions::release(const session_ptr& session, std::uint64_t grant_id,
                                     const std::string& unlock_sql,
                                     std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  {
    std::unique_lock lock(mutex_);
    if (!returned_.wait_until(lock, deadline,
                              [&] { return !session->in_use || session->broken; })) {
      return "no answer to the release in time";
    }
    if (session->broken) {
      session->grants.erase(grant_id);
      return {};  // the session ended, and the server freed its locks with it
    }
    session->in_use = true;
  }
  query_result r = send_blocking(session->conn, endpoint_, unlock_sql, {}, deadline);
  if (r.ok()) {
    {
      std::lock_guard lock(mutex_);
      session->grants.erase(grant_id);
      check_in_locked(session);
    }
    returned_.notify_all();
    return {};
  }
  {
    std::lock_guard lock(mutex_);
    session->grants.erase(grant_id);
  }
  // An unlock that failed may leave the lock held by the session: ending it frees it.
  give_up(session);
  if (!r.connection_broken) return r.message;
  if (std::chrono::steady_clock::now() >= deadline) return "no answer to the release in time";
  return {};
}

void caller_sessions::release_in_background(session_ptr session, std::uint64_t grant_id,
                                            std::string unlock_sql,
                                            std::function<void(std::string)> failed) {
  boost::asio::post(executor_, [weak = weak_from_this(), session = std::move(session), grant_id,
                                sql = std::move(unlock_sql), failed = std::move(failed)]() mutable {
    if (auto self = weak.lock()) {
      self->release_from_io(std::move(session), grant_id, std::move(sql), std::move(failed));
    }
  });
}

// Counted as a probe, so that a server that never answers has the session given up.
void caller_sessions::release_from_io(session_ptr session, std::uint64_t grant_id,
                                      std::string unlock_sql,
                                      std::function<void(std::string)> failed) {
  {
    std::lock_guard lock(mutex_);
    if (session->broken) {
      session->grants.erase(grant_id);
      return;
    }
    if (session->in_use) {
      // A caller's statement takes one round trip: try again shortly.
      auto retry = std::make_shared<boost::asio::steady_timer>(executor_);
      retry->expires_after(std::chrono::milliseconds(1));
      retry->async_wait([weak = weak_from_this(), retry, session, grant_id, unlock_sql,
                         failed](boost::system::error_code ec) mutable {
        auto self = weak.lock();
        if (ec || !self) return;
        self->release_from_io(std::move(session), grant_id, std::move(unlock_sql),
                              std::move(failed));
      });
      return;
    }
    session->in_use = session->probing = true;
    session->probe_sent = std::chrono::steady_clock::now();
  }
  exchange_on_io(session, std::move(unlock_sql),
                 [weak = weak_from_this(), session, grant_id, failed](query_result r) {
                   auto self = weak.lock();
                   if (!self) return;
                   {
                     std::lock_guard lock(self->mutex_);
                     session->probing = false;
                     session->grants.erase(grant_id);
                     if (r.ok()) {
                       self->check_in_locked(session);
                     }
                   }
                   if (r.ok()) {
                     self->returned_.notify_all();
                     return;
                   }
                   self->give_up(session);
                   if (!r.connection_broken) failed(r.message);
                 });
}

void caller_sessions::exchange_on_io(const session_ptr& session, std::string sql,
                                     std::function<void(query_result)> done) {
  if (session->socket) {
    drop_socket(*session);  // a watch: the exchange's answer or failure tells as much
    std::lock_guard lock(mutex_);
    session->watched = false;
  }
  if (!PQsendQuery(session->conn, sql.c_str()) || PQflush(session->conn) < 0) {
    done(broken_result(libpq_message(PQerrorMessage(session->conn))));
    return;
  }
  session->socket.emplace(executor_, PQsocket(session->conn));
  read_on_io(session, std::make_shared<query_result>(), std::move(done));
}

void caller_sessions::read_on_io(const session_ptr& session,
                                 std::shared_ptr<query_result> collected,
                                 std::function<void(query_result)> done) {
  // A statement the send buffer could not take at once is flushed as the socket drains.
  const bool writing = PQflush(session->conn) > 0;
  session->socket->async_wait(
      writing ? boost::asio::posix::descriptor_base::wait_write
              : boost::asio::posix::descriptor_base::wait_read,
      [weak = weak_from_this(), session, collected, done = std::move(done),
       writing](boost::system::error_code ec) mutable {
        auto self = weak.lock();
        if (ec || !self) return;  // closed: whoever closed it has given the session up
        PGconn* conn = session->conn;
        auto finish = [&](query_result r) {
          drop_socket(*session);
          done(std::move(r));
        };
        if (!writing && !PQconsumeInput(conn)) {
          finish(broken_result(libpq_message(PQerrorMessage(conn))));
          return;
        }
        while (!writing && !PQisBusy(conn)) {
          PGresult* result = PQgetResult(conn);
          if (!result) {
            if (PQstatus(conn) == CONNECTION_BAD) collected->connection_broken = true;
            finish(std::move(*collected));
            return;
          }
          add_result(*collected, result);
        }
        if (PQstatus(conn) == CONNECTION_BAD) {
          finish(broken_result(libpq_message(PQerrorMessage(conn))));
          return;
        }
        self->read_on_io(session, std::move(collected), std::move(done));
      });
}

void caller_sessions::close_all() {
  std::lock_guard lock(mutex_);
  for (auto& session : sessions_) {
    drop_socket(*session);
    if (session->conn) PQfinish(session->conn);
    session->conn = nullptr;
  }
  sessions_.clear();
}

}  // namespace dlock::postgres::detail
