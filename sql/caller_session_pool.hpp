// Private to the SQL backends: sessions that the callers' threads drive themselves, for the
// uncontended attempt and its release (inline_acquirer::try_acquire_inline) and PostgreSQL's
// blocking wait (postgres/src/caller_wait.cpp), so that none waits for the provider's thread.
// The keepalive that the provider's thread keeps for them is in caller_session_keepalive.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/lease.hpp>

#include "server_answers.hpp"
#include "session_grants.hpp"

namespace dlock {

/// What a session of a driver that declares no `session_extras` carries beside its connection.
struct no_session_extras {};

namespace caller_session_detail {
template <typename Driver>
struct extras_of {
  using type = no_session_extras;
};
template <typename Driver>
  requires requires { typename Driver::session_extras; }
struct extras_of<Driver> {
  using type = typename Driver::session_extras;
};
}  // namespace caller_session_detail

/// One caller-driven session and the grants on it. Whoever has it checked out (`in_use`, under
/// the pool's mutex) may use `conn`: a caller's thread, or the provider's io thread for a
/// keepalive probe, a loss check or a release in the background.
template <typename Driver>
struct caller_session {
  using grant = typename Driver::grant;
  using extras_type = typename caller_session_detail::extras_of<Driver>::type;
  ~caller_session() {
    drop_socket();
    if (conn) Driver::close(conn);
  }

  /// Ends the io thread's wait on the socket, leaving the descriptor to the client library.
  void drop_socket() noexcept {
    if (!socket) return;
    boost::system::error_code ignored;
    socket->cancel(ignored);
    socket->release();
    socket.reset();
  }

  typename Driver::connection conn = nullptr;  // closed on the io thread (or once it stopped)
  bool fresh = true;  // not checked out before (whoever checks it out reads and clears it)
  // What the driver keeps of the session beside its connection, fixed when it was opened.
  [[no_unique_address]] extras_type extras;
  // Guarded by the pool's mutex:
  session_grants<grant> grants;
  bool in_use = false;
  bool probing = false;  // in_use by the keepalive
  bool watched = false;  // a loss check is posted or armed on the io thread
  bool broken = false;   // given up: never checked out again; its grants are lost
  std::chrono::steady_clock::time_point probe_sent{};
  // Until when its grants are known valid (caller_session_pool::validity_of_grant), shared
  // with their leases; thread-safe itself.
  std::shared_ptr<grant_validity> validity =
      std::make_shared<grant_validity>(std::chrono::steady_clock::time_point::min());
  // The io thread's wait on the socket, only while it watches or probes; io thread only.
  std::optional<boost::asio::posix::stream_descriptor> socket;
};

/// The caller-driven sessions of one provider.
///
/// A caller checks a session out for one attempt (never one that holds the attempt's
/// resource: the servers' session locks are re-entrant per session, nor one with
/// locks_per_session grants) and checks it in; a grant keeps its session until its release,
/// which checks the same session out again. The provider's io thread keeps the contract for
/// them as session_keepalive does for a pool: it probes every idle session each half keepalive
/// (which also resets the server's idle limit, the server lease), gives one up whose probe goes
/// unanswered for a period, marks lost the grants a probe finds no longer held, and watches the
/// socket of an idle session that holds grants (from watch_delay after its check-in), so that
/// a session the server ends (a KILL, a restart) has its grants marked lost at once. One idle
/// session that holds nothing is kept; more are closed at the next probe. A blocking acquire
/// may also wait on one (check_out_for_wait): its caller's thread then asks silent_for_wait()
/// whether the server still answers.
///
/// `Driver` has `connection` (a client handle, nullptr for none), `grant` (with
/// `std::string resource` and `std::stop_source lost`) and `result` (ok(), connection_broken,
/// message); open(deadline, why) connects and prepares a session on the caller's thread
/// (nullptr with the reason in `why`), or open(deadline, why, wakeup, extras) for a driver
/// with `session_extras` (what each session carries beside its connection: it fills them),
/// which also gives up when the descriptor `wakeup` (-1: none) becomes readable (nullptr with
/// `why` empty); exchange(conn, sql, deadline) runs a statement there,
/// exchange_on_io(session, sql, done) runs one on the io thread waiting on session->socket,
/// probe_sql(grants) and still_held(result, i) check the grants on a probe, and the statics
/// socket(conn), still_open(conn) (after an idle socket became readable, without blocking)
/// and close(conn).
template <typename Driver>
class caller_session_pool : public std::enable_shared_from_this<caller_session_pool<Driver>> {
 public:
  using session = caller_session<Driver>;
  using session_ptr = std::shared_ptr<session>;
  using grant = typename Driver::grant;
  using result = typename Driver::result;

  struct limits {
    std::chrono::nanoseconds connect_timeout;
    std::chrono::nanoseconds keepalive;
    std::uint32_t locks_per_session = 0;  // 0: no limit
  };

  /// Asks the server for an answer on another session, from the io thread: for when it has
  /// been silent and no caller-driven session is left to probe.
  using other_prober = std::function<void(std::function<void(bool answered)>)>;

  caller_session_pool(boost::asio::any_io_executor executor, Driver driver, limits limit,
                      other_prober probe_elsewhere)
      : executor_(std::move(executor)), driver_(std::move(driver)), limits_(limit),
        probe_elsewhere_(std::move(probe_elsewhere)), answers_(limit.keepalive),
        timer_(executor_), sweep_timer_(executor_) {}

  Driver& driver() noexcept { return driver_; }

  /// Since when the server has left a probe of these sessions unanswered for half a period or
  /// more, until it answers again (nullopt: it answers). Any thread.
  std::optional<std::chrono::steady_clock::time_point> silent_since() const noexcept {
    const std::int64_t since = silent_since_.load(std::memory_order_relaxed);
    if (since == 0) return std::nullopt;
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since));
  }

  /// Starts the keepalive on the io thread, ticking every half keepalive period.
  void start() {
    boost::asio::post(executor_, [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->schedule();
    });
  }

  /// One tick of the keepalive, for a pool that ticks to another's rhythm instead of start().
  /// Io thread only.
  void tick() { probe(); }

  /// A session checked out for an attempt of `resource`, opened (blocking, at most
  /// connect_timeout) when none is free; nullptr with the reason in `why` when none can be
  /// opened, with `why` empty when the descriptor `wakeup` (-1: none; only for a driver whose
  /// open takes one) became readable while it connected (a stop request). Callers' threads.
  session_ptr check_out(const std::string& resource, std::string& why, int wakeup = -1) {
    return check_out_where(
        [&](const session& s) {
          const bool full = limits_.locks_per_session != 0 &&
                            s.grants.size() >= limits_.locks_per_session;
          return !full && !s.grants.holds(resource);
        },
        why, wakeup);
  }

  /// The same for a wait, which keeps its session busy until it ends: one that holds nothing
  /// (a release of its grants would wait for the wait).
  session_ptr check_out_for_wait(std::string& why, int wakeup) {
    return check_out_where([](const session& s) { return s.grants.empty(); }, why, wakeup);
  }

  /// Counts a caller's thread's wait on a session while it lives: the io thread then asks the
  /// server for an answer at every tick of the keepalive, on another session, since the
  /// waiting one cannot answer.
  class counted_wait {
   public:
    explicit counted_wait(caller_session_pool& pool) : pool_(pool) {
      pool_.waits_.fetch_add(1, std::memory_order_relaxed);
    }
    ~counted_wait() { pool_.waits_.fetch_sub(1, std::memory_order_relaxed); }
    counted_wait(const counted_wait&) = delete;
    counted_wait& operator=(const counted_wait&) = delete;

   private:
    caller_session_pool& pool_;
  };

  /// True once the server has answered nothing for a whole keepalive period, counted from
  /// `since` if later: a wait begun then is to be given up. Any thread.
  bool silent_for_wait(std::chrono::steady_clock::time_point since) const noexcept {
    return std::chrono::steady_clock::now() - std::max(answers_.last_heard(), since) >=
           limits_.keepalive;
  }

  /// Gives a checked-out session back; a session holding grants is watched from then on.
  void check_in(const session_ptr& s) {
    {
      std::lock_guard lock(mutex_);
      check_in_locked(s);
    }
    returned_.notify_all();
  }

  /// Ends a checked-out session: the server frees what it held, its grants are marked lost.
  void give_up(const session_ptr& s) {
    std::vector<std::stop_source> lost;
    {
      std::lock_guard lock(mutex_);
      lost = break_locked(*s);
      std::erase(sessions_, s);
    }
    returned_.notify_all();
    close_on_io(s);
    signal_all(lost);
  }

  /// The validity of a grant a checked-out session was just given by a statement sent no
  /// earlier than `sent`, out of a wait or not (server_answers::validity_of_grant). Every probe
  /// the server answers on the session moves it on from the probe's sending. Any thread.
  std::shared_ptr<const grant_validity> validity_of_grant(
      session& s, std::chrono::steady_clock::time_point sent, bool waited = false) {
    return answers_.validity_of_grant(s.validity, sent, waited);
  }

  /// Books a grant on a checked-out session; returns its id.
  std::uint64_t add_grant(session& s, grant g) {
    std::lock_guard lock(mutex_);
    const std::uint64_t id = next_grant_id_++;
    s.grants.emplace(id, std::move(g));
    return id;
  }

  /// Gives the grant back with `unlock_sql` on the caller's thread, waiting at most `timeout`
  /// for the session and the server. Returns the error, empty on success (a session that is
  /// gone freed its locks with it).
  std::string release(const session_ptr& s, std::uint64_t grant_id, const std::string& unlock_sql,
                      std::chrono::nanoseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    {
      std::unique_lock lock(mutex_);
      if (!returned_.wait_until(lock, deadline, [&] { return !s->in_use || s->broken; })) {
        return "no answer to the release within release_timeout";
      }
      if (s->broken) {
        s->grants.erase(grant_id);
        return {};  // the session ended, and the server freed its locks with it
      }
      s->in_use = true;
    }
    const result r = driver_.exchange(s->conn, unlock_sql, deadline);
    {
      std::lock_guard lock(mutex_);
      s->grants.erase(grant_id);
      if (r.ok()) check_in_locked(s);
    }
    if (r.ok()) {
      returned_.notify_all();
      return {};
    }
    // An unlock that failed may leave the lock held by the session: ending it frees it.
    give_up(s);
    if (!r.connection_broken) return r.message;
    if (std::chrono::steady_clock::now() >= deadline) {
      return "no answer to the release within release_timeout";
    }
    return {};
  }

  /// The same from the io thread, in the background; `failed` gets an error message.
  void release_in_background(session_ptr s, std::uint64_t grant_id, std::string unlock_sql,
                             std::function<void(std::string)> failed) {
    boost::asio::post(executor_, [weak = this->weak_from_this(), s = std::move(s), grant_id,
                                  sql = std::move(unlock_sql),
                                  failed = std::move(failed)]() mutable {
      if (auto self = weak.lock()) {
        self->release_from_io(std::move(s), grant_id, std::move(sql), std::move(failed));
      }
    });
  }

  /// Closes every session: for the backend's destructor, once its thread has stopped.
  void close_all() {
    std::lock_guard lock(mutex_);
    for (auto& s : sessions_) {
      s->drop_socket();
      if (s->conn) Driver::close(s->conn);
      s->conn = nullptr;
    }
    sessions_.clear();
  }

 private:
  template <typename Usable>
  session_ptr check_out_where(const Usable& usable, std::string& why, int wakeup) {
    {
      std::unique_lock lock(mutex_);
      const auto stop_waiting = std::chrono::steady_clock::now() +
                                std::min(limits_.connect_timeout, limits_.keepalive);
      while (true) {
        bool probed = false;
        for (auto& s : sessions_) {
          if (s->broken || !usable(*s)) continue;
          if (s->in_use) {
            probed = probed || s->probing;
            continue;
          }
          s->in_use = true;
          return s;
        }
        // A probe takes one round trip: waiting for it is cheaper than a new session, unless
        // the server does not answer it in time (then the new session's connect fails too).
        if (!probed || std::chrono::steady_clock::now() >= stop_waiting) break;
        returned_.wait_until(lock, stop_waiting);
      }
    }
    const auto opening = std::chrono::steady_clock::now();
    const auto deadline = opening + limits_.connect_timeout;
    auto opened = std::make_shared<session>();
    if constexpr (requires { driver_.open(deadline, why, wakeup, opened->extras); }) {
      opened->conn = driver_.open(deadline, why, wakeup, opened->extras);
    } else {
      assert(wakeup < 0);  // a driver that cannot be woken while it connects is given none
      opened->conn = driver_.open(deadline, why);
    }
    if (!opened->conn) return nullptr;
    silent_since_.store(0, std::memory_order_relaxed);  // the server answered the setup
    answers_.heard(opening);
    opened->in_use = true;
    std::lock_guard lock(mutex_);
    sessions_.push_back(opened);
    return opened;
  }

  static void signal_all(std::vector<std::stop_source>& lost) {
    for (auto& signal : lost) signal.request_stop();
  }

  // A session that holds grants is watched from the next sweep, a moment later: most grants
  // of a busy caller are released before it, and a watch costs the io thread a wake-up when
  // it is armed and another when the caller's own traffic comes.
  void check_in_locked(const session_ptr& s) {
    s->in_use = false;
    if (s->broken || s->watched || s->grants.empty() || sweep_pending_) return;
    sweep_pending_ = true;
    boost::asio::post(executor_, [weak = this->weak_from_this()] {
      auto self = weak.lock();
      if (!self) return;
      self->sweep_timer_.expires_after(watch_delay);
      self->sweep_timer_.async_wait([weak = self->weak_from_this()](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->sweep();
      });
    });
  }

  std::vector<std::stop_source> break_locked(session& s) {
    s.broken = true;
    s.in_use = false;
    s.probing = false;
    std::vector<std::stop_source> lost;
    for (const auto& [id, g] : s.grants) lost.push_back(g.lost);
    return lost;
  }

  // Closing the socket is what makes the server end the session and free its locks. On the
  // io thread, which may be waiting on that socket.
  void close_on_io(const session_ptr& s) {
    boost::asio::post(executor_, [s] {
      s->drop_socket();
      if (s->conn) Driver::close(s->conn);
      s->conn = nullptr;
    });
  }

  // A caller's statement takes one round trip: a release that finds the session in use tries
  // again shortly. Counted as a probe, so that a server that never answers has the session
  // given up.
  void release_from_io(session_ptr s, std::uint64_t grant_id, std::string unlock_sql,
                       std::function<void(std::string)> failed) {
    {
      std::lock_guard lock(mutex_);
      if (s->broken) {
        s->grants.erase(grant_id);
        return;
      }
      if (s->in_use) {
        auto retry = std::make_shared<boost::asio::steady_timer>(executor_);
        retry->expires_after(std::chrono::milliseconds(1));
        retry->async_wait([weak = this->weak_from_this(), retry, s, grant_id, unlock_sql,
                           failed](boost::system::error_code ec) mutable {
          auto self = weak.lock();
          if (ec || !self) return;
          self->release_from_io(std::move(s), grant_id, std::move(unlock_sql),
                                std::move(failed));
        });
        return;
      }
      s->in_use = s->probing = true;
      s->probe_sent = std::chrono::steady_clock::now();
    }
    exchange_on_io(s, std::move(unlock_sql),
                   [weak = this->weak_from_this(), s, grant_id, failed](result r) {
                     auto self = weak.lock();
                     if (!self) return;
                     {
                       std::lock_guard lock(self->mutex_);
                       s->probing = false;
                       s->grants.erase(grant_id);
                       if (r.ok()) self->check_in_locked(s);
                     }
                     if (r.ok()) {
                       self->returned_.notify_all();
                       return;
                     }
                     self->give_up(s);
                     if (!r.connection_broken) failed(r.message);
                   });
  }

  void exchange_on_io(const session_ptr& s, std::string sql, std::function<void(result)> done) {
    if (s->socket) {
      s->drop_socket();  // a watch: the exchange's answer or failure tells as much
      std::lock_guard lock(mutex_);
      s->watched = false;
    }
    driver_.exchange_on_io(s, std::move(sql), std::move(done));
  }

  // caller_session_keepalive.hpp
  void schedule();
  void probe();
  void probe_answered(const session_ptr& s, const std::vector<std::uint64_t>& ids,
                      const result& r);
  void sweep();
  void watch(const session_ptr& s);
  void examine(const session_ptr& s);

  boost::asio::any_io_executor executor_;
  Driver driver_;
  limits limits_;
  other_prober probe_elsewhere_;
  bool probing_elsewhere_ = false;  // io thread only
  // silent_since() as steady_clock ticks, 0 while the server answers.
  std::atomic<std::int64_t> silent_since_{0};
  server_answers answers_;  // on the probes, new sessions and probes elsewhere
  std::atomic<int> waits_{0};  // callers' threads waiting on a session (counted_wait)
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer sweep_timer_;
  // How long after its check-in a session that holds grants is watched at the latest.
  static constexpr std::chrono::milliseconds watch_delay{20};

  std::mutex mutex_;
  std::condition_variable returned_;  // a session was checked in or given up
  std::vector<session_ptr> sessions_;
  std::uint64_t next_grant_id_ = 1;
  bool sweep_pending_ = false;  // a sweep will watch what is checked in with grants until then
};

}  // namespace dlock

#include "caller_session_keepalive.hpp"
