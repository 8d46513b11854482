// Private to the SQL backends (dlock::postgres and dlock::mysql): the round trips that find a
// silent connection in a pool of SQL sessions.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/lease.hpp>
#include <dlock/core/detail/unique_function.hpp>
#include <dlock/core/health.hpp>

#include "server_answers.hpp"

namespace dlock {

/// A backend's health() when its server has left a keepalive (of `period`) unanswered since
/// `since` (nullopt: it answers, healthy). `owner` words the problem.
inline provider_health keepalive_health(const backend& owner,
                                        std::optional<std::chrono::steady_clock::time_point> since,
                                        std::chrono::nanoseconds period) {
  provider_health health;
  if (!since) return health;
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto silent = duration_cast<milliseconds>(std::chrono::steady_clock::now() - *since);
  health.connected = false;
  health.problems.push_back(owner.message(
      "the server has not answered a keepalive for " + std::to_string(silent.count()) +
      " ms (sessions are given up after keepalive = " +
      std::to_string(duration_cast<milliseconds>(period).count()) + " ms)"));
  return health;
}

/// keepalive_health() for a backend with two sets of sessions kept alive (its pool and its
/// caller-driven sessions): not connected since the earlier of their silences.
inline provider_health keepalive_health(
    const backend& owner, std::optional<std::chrono::steady_clock::time_point> pool_silent,
    std::optional<std::chrono::steady_clock::time_point> callers_silent,
    std::chrono::nanoseconds period) {
  if (callers_silent && (!pool_silent || *callers_silent < *pool_silent)) {
    pool_silent = callers_silent;
  }
  return keepalive_health(owner, pool_silent, period);
}

/// Probes the sessions of a pool every half period and gives up a session whose probe went
/// unanswered for a whole period: a break is noticed at most one and a half periods after it
/// happened. The probes also reset every session's idle timer on the server (the backends'
/// server lease), so only a client that has gone silent loses its sessions.
///
/// A session waiting in a blocking statement cannot answer a probe; while waits run, the
/// server is probed on another session (opened if there is none), and every wait is given up
/// once the server has answered no probe for a whole period.
///
/// The same rule bounds a grant by the clock (lease.hpp, grant_validity): it is known valid
/// until the sending of the last statement the server answered on its session plus the
/// silence bound, 1.5 periods, the time after which the probes give a silent session up. The
/// server ends a silent session no earlier (the backends' server_lease is at least 1.5
/// periods, counted from the last statement it received, sent no earlier than that).
///
/// `Pool` has sessions() (a vector of std::shared_ptr<Session>), session_for_attempt("") and
/// retire_if_spare(session); a Session has `reserved`, `probe_sent`
/// (std::optional<steady_clock::time_point>) and a `connection` with broken(), busy() and
/// abandon(std::string). The backend's prober sends one probe on a session and reports
/// whether the server answered. Runs on the pool's thread only, except start().
template <typename Pool>
class session_keepalive : public std::enable_shared_from_this<session_keepalive<Pool>> {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using session_ptr = typename std::decay_t<decltype(std::declval<Pool&>().sessions())>::value_type;
  using prober = std::function<void(const session_ptr&, detail::unique_function<void(bool)>)>;

  session_keepalive(boost::asio::any_io_executor executor, std::weak_ptr<Pool> pool,
                    std::chrono::nanoseconds period, prober probe)
      : timer_(std::move(executor)), pool_(std::move(pool)), period_(period),
        prober_(std::move(probe)), answers_(period) {}

  /// Runs `tick` at every tick, before the pool's probes: for other sessions kept alive to
  /// the same rhythm, so that a silent server is judged on both at the same moment. Before
  /// start().
  void also_on_tick(std::function<void()> tick) { also_on_tick_ = std::move(tick); }

  /// Starts ticking; runs until the executor stops or the pool is gone.
  void start() {
    boost::asio::post(timer_.get_executor(), [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->schedule();
    });
  }

  /// Since when the server has left a probe unanswered for half a period or more, until it
  /// answers one again (nullopt: it answers). Any thread.
  std::optional<std::chrono::steady_clock::time_point> silent_since() const noexcept {
    const std::int64_t since = silent_since_.load(std::memory_order_relaxed);
    if (since == 0) return std::nullopt;
    return time_point(std::chrono::steady_clock::duration(since));
  }

  /// The backend's health() from what the probes found: not connected while the server is
  /// silent. `owner` words the problem. Any thread.
  provider_health health(const backend& owner) const {
    return keepalive_health(owner, silent_since(), period_);
  }

  /// The validity of a grant `session` was just given by a statement sent no earlier than
  /// `sent`, out of a wait or not (server_answers::validity_of_grant). Its probes renew it
  /// from then on.
  std::shared_ptr<const grant_validity> validity_of_grant(const session_ptr& session,
                                                          time_point sent, bool waited) {
    return answers_.validity_of_grant(session->validity, sent, waited);
  }

 private:
  // A session running a waiting statement (a semaphore waiter's is reserved between its
  // statements too, and probed then).
  static bool waiting(const session_ptr& session) {
    return session->reserved && session->connection->busy() && !session->probe_sent;
  }

  // Ticks twice a period, so a probe is judged no later than half a period after it has gone
  // unanswered for a whole one.
  void schedule() {
    timer_.expires_after(period_ / 2);
    timer_.async_wait([weak = this->weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      if (self->also_on_tick_) self->also_on_tick_();
      self->probe();
      self->schedule();
    });
  }

  // Every session that is not waiting gets a probe, even one that holds nothing (the server's
  // idle limit would end it) or runs an attempt: queued behind it, the probe is answered only
  // once the attempt is, so an attempt the server never answers ends as a broken session
  // instead of hanging.
  void probe() {
    auto pool = pool_.lock();
    if (!pool) return;
    const auto now = std::chrono::steady_clock::now();
    bool server_probed = false;
    auto sessions = pool->sessions();
    for (auto& session : sessions) {
      if (session->connection->broken() || waiting(session)) continue;
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

  void note_silence(time_point since) noexcept {
    std::int64_t answering = 0;
    silent_since_.compare_exchange_strong(answering, since.time_since_epoch().count(),
                                          std::memory_order_relaxed);
  }

  void send_probe(const session_ptr& session, time_point now) {
    session->probe_sent = now;
    prober_(session, [weak = this->weak_from_this(), session, now](bool answered) {
      session->probe_sent.reset();
      auto self = weak.lock();
      if (!self) return;
      if (answered) {
        self->answers_.probe_answered(*session->validity, now);
        self->silent_since_.store(0, std::memory_order_relaxed);
      }
      if (auto pool = self->pool_.lock()) pool->retire_if_spare(session);
    });
  }

  // Whether the server still answers at all is asked on another session, opened for it if
  // none is left. Once it has answered nothing for a whole period (counted from when the waits
  // began, if later), every wait is given up: its session is closed and its acquire fails as
  // a connection_error.
  void watch_waits(Pool& pool, bool server_probed, time_point now) {
    std::vector<session_ptr> waits;
    for (const auto& session : pool.sessions()) {
      if (!session->connection->broken() && waiting(session)) waits.push_back(session);
    }
    if (waits.empty()) {
      waits_since_.reset();
      return;
    }
    if (!waits_since_) waits_since_ = now;
    if (!server_probed) send_probe(pool.session_for_attempt(""), now);
    if (now - std::max(answers_.last_heard(), *waits_since_) < period_) return;
    for (auto& session : waits) {
      session->connection->abandon("no answer from the server to a keepalive within one period");
    }
    waits_since_.reset();
  }

  boost::asio::steady_timer timer_;
  std::weak_ptr<Pool> pool_;
  std::chrono::nanoseconds period_;
  prober prober_;
  std::function<void()> also_on_tick_;
  server_answers answers_;                 // on the probes
  std::optional<time_point> waits_since_;  // since when waits have been running
  // silent_since() as steady_clock ticks, 0 while the server answers. While it is set and no
  // session is left to probe, a probe opens one, so that the answer that clears it comes.
  std::atomic<std::int64_t> silent_since_{0};
};

}  // namespace dlock
