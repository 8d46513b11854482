#include "keepalive.hpp"

#include <boost/asio/post.hpp>

namespace dlock::postgres::detail {

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
// gone already, and the holders must hear it. Probes also go to a session that holds nothing
// but runs a statement (an attempt): queued behind it, the probe is answered only once the
// statement is, so an attempt the server never answers ends as a broken session instead of
// hanging. Reserved sessions are left alone: their blocking wait may rightly run for long
// (TCP keepalives bound it).
void keepalive::probe() {
  auto pool = pool_.lock();
  if (!pool) return;
  const auto now = std::chrono::steady_clock::now();
  auto sessions = pool->sessions();
  for (auto& session : sessions) {
    if (session->reserved || session->connection->broken()) continue;
    if (session->probe_sent) {
      if (now - *session->probe_sent >= period_) {
        session->connection->abandon("no answer to the keepalive within one period");
      }
      continue;
    }
    if (session->grants.empty() && !session->connection->busy()) continue;
    session->probe_sent = now;
    session->connection->execute("SELECT 1", [weak_pool = pool_, session](query_result) {
      session->probe_sent.reset();
      if (auto pool = weak_pool.lock()) pool->retire_if_spare(session);
    });
  }
}

}  // namespace dlock::postgres::detail
