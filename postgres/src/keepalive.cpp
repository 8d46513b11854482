#include "keepalive.hpp"

#include <algorithm>
#include <vector>

#include <boost/asio/post.hpp>

namespace dlock::postgres::detail {

namespace {

// A session running a waiting statement: a lock's pg_advisory_lock, or a semaphore waiter's
// attempt (its session is reserved between attempts too, and probed then).
bool waiting(const pg_session& session) {
  return session.reserved && session.connection->busy() && !session.probe_sent;
}

}  // namespace

keepalive::keepalive(boost::asio::any_io_executor executor, std::weak_ptr<session_pool> pool,
                     std::chrono::nanoseconds period)
    : timer_(std::move(executor)), pool_(std::move(pool)), period_(period) {}

void keepalive::start() {
  boost::asio::post(timer_.get_executor(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->schedule();
  });
}

// Ticks twice a period, so a probe is judged no later than half a period after it has gone
// unanswered for a whole one.
void keepalive::schedule() {
  timer_.expires_after(period_ / 2);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->probe();
    self->schedule();
  });
}

// A session whose probe has gone unanswered for a whole period is given up: its locks may be
// gone already, and the holders must hear it. Every other session gets a probe, even one that
// holds nothing (the server's idle_session_timeout would end it) or runs an attempt: queued
// behind it, the probe is answered only once the attempt is, so an attempt the server never
// answers ends as a broken session instead of hanging. Waiting sessions are left to
// watch_waits().
void keepalive::probe() {
  auto pool = pool_.lock();
  if (!pool) return;
  const auto now = std::chrono::steady_clock::now();
  bool server_probed = false;
  auto sessions = pool->sessions();
  for (auto& session : sessions) {
    if (session->connection->broken() || waiting(*session)) continue;
    if (session->probe_sent) {
      if (now - *session->probe_sent >= period_ / 2) note_silence(*session->probe_sent);
      if (now - *session->probe_sent >= period_) {
        session->connection->abandon("no answer to the keepalive within one period");
        continue;
      }
    } else {
      send_probe(session, now);
    }
    server_probed = server_probed || !session->reserved;
  }
  if (!server_probed && silent_since_.load(std::memory_order_relaxed) != 0) {
    send_probe(pool->session_for_attempt(""), now);  // is the server back?
    server_probed = true;
  }
  watch_waits(*pool, server_probed, now);
}

void keepalive::note_silence(time_point since) noexcept {
  std::int64_t answering = 0;
  silent_since_.compare_exchange_strong(answering, since.time_since_epoch().count(),
                                        std::memory_order_relaxed);
}

std::optional<std::chrono::steady_clock::time_point> keepalive::silent_since() const noexcept {
  const std::int64_t since = silent_since_.load(std::memory_order_relaxed);
  if (since == 0) return std::nullopt;
  return time_point(std::chrono::steady_clock::duration(since));
}

void keepalive::send_probe(const std::shared_ptr<pg_session>& session, time_point now) {
  session->probe_sent = now;
  session->connection->execute(
      "SELECT 1", [weak = weak_from_this(), weak_pool = pool_, session](query_result r) {
        session->probe_sent.reset();
        if (auto self = weak.lock(); self && r.ok()) {
          self->heard_ = std::chrono::steady_clock::now();
          self->silent_since_.store(0, std::memory_order_relaxed);
        }
        if (auto pool = weak_pool.lock()) pool->retire_if_spare(session);
      });
}

// The server cannot answer on a waiting session until the wait ends; whether it still
// answers at all is asked on another session, opened for it if none is left. Once it has
// answered nothing for a whole period (counted from when the waits began, if later), every
// wait is given up: its session is closed and its acquire fails as a connection_error. The
// server drops the wait once it notices (docs/postgres.md, Faults).
void keepalive::watch_waits(session_pool& pool, bool server_probed, time_point now) {
  std::vector<std::shared_ptr<pg_session>> waits;
  for (const auto& session : pool.sessions()) {
    if (!session->connection->broken() && waiting(*session)) waits.push_back(session);
  }
  if (waits.empty()) {
    waits_since_.reset();
    return;
  }
  if (!waits_since_) waits_since_ = now;
  if (!server_probed) send_probe(pool.session_for_attempt(""), now);
  if (now - std::max(heard_, *waits_since_) < period_) return;
  for (auto& session : waits) {
    session->connection->abandon("no answer from the server to a keepalive within one period");
  }
  waits_since_.reset();
}

}  // namespace dlock::postgres::detail
