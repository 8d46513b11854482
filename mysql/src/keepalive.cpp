#include "keepalive.hpp"

#include <algorithm>
#include <vector>

#include <boost/asio/post.hpp>

#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

// A connection running a waiting statement (it is reserved between a semaphore's slices too,
// and probed then).
bool waiting(const mysql_session& session) {
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

// Every connection that is not waiting gets a probe, even one that holds nothing (the
// server's wait_timeout would end it) or runs an attempt (queued behind it, the probe is
// answered only once the attempt is, so an attempt the server never answers ends as a broken
// connection instead of hanging).
void keepalive::probe() {
  auto pool = pool_.lock();
  if (!pool) return;
  const auto now = std::chrono::steady_clock::now();
  bool server_probed = false;
  auto sessions = pool->sessions();
  for (auto& session : sessions) {
    if (session->connection->broken() || waiting(*session)) continue;
    if (session->probe_sent) {
      if (now - *session->probe_sent >= period_) {
        session->connection->abandon("no answer to the keepalive within one period");
        continue;
      }
    } else {
      send_probe(session, now);
    }
    server_probed = server_probed || !session->reserved;
  }
  watch_waits(*pool, server_probed, now);
}

// The probe names the grants it checks as they are when it is sent; a grant released or
// added meanwhile is judged at the next probe.
void keepalive::send_probe(const std::shared_ptr<mysql_session>& session, time_point now) {
  session->probe_sent = now;
  std::vector<std::uint64_t> ids;
  std::vector<std::string> names;
  for (const auto& [id, grant] : session->grants) {
    ids.push_back(id);
    names.push_back(grant.server_name);
  }
  session->connection->execute(
      probe_sql(names),
      [weak = weak_from_this(), weak_pool = pool_, session, ids](query_result r) {
        session->probe_sent.reset();
        if (!r.ok()) return;
        if (auto self = weak.lock()) self->heard_ = std::chrono::steady_clock::now();
        const auto ours = r.value(0);
        std::vector<std::stop_source> lost;
        for (std::size_t i = 0; i < ids.size(); ++i) {
          auto grant = session->grants.find(ids[i]);
          if (grant != session->grants.end() && r.value(i + 1) != ours) {
            lost.push_back(grant->second.lost);
          }
        }
        for (auto& signal : lost) signal.request_stop();
        if (auto pool = weak_pool.lock()) pool->retire_if_spare(session);
      });
}

// The server cannot answer on a waiting connection until the wait ends; whether it still
// answers at all is asked on another one, opened for it if none is left. Once it has answered
// nothing for a whole period (counted from when the waits began, if later), every wait is
// given up: its connection is closed and its acquire fails as a connection_error.
void keepalive::watch_waits(session_pool& pool, bool server_probed, time_point now) {
  std::vector<std::shared_ptr<mysql_session>> waits;
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

}  // namespace dlock::mysql::detail
