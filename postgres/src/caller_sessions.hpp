// Private to dlock::postgres: sessions that the callers' threads drive themselves, for the
// uncontended attempt and its release (inline_acquirer::try_acquire_inline), so that neither
// waits for the provider's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <libpq-fe.h>

#include <dlock/postgres/options.hpp>

#include "connection_string.hpp"
#include "pg_connection.hpp"
#include "session_grants.hpp"

namespace dlock::postgres::detail {

/// One caller-driven session and the grants on it. Whoever has it checked out (`in_use`, under
/// the pool's mutex) may use `conn`: a caller's thread, or the provider's io thread for a
/// keepalive probe, a loss check or a release in the background.
struct caller_session {
  struct grant {
    std::string resource;
    std::stop_source lost;
  };
  ~caller_session();

  PGconn* conn = nullptr;  // closed on the io thread (or once it has stopped)
  int pid = 0;             // the server process (pg_locks.pid), fixed for the session's life
  std::string backend_start;  // pg_stat_activity.backend_start as text: a cancel's guard
  // Set while a cancel request of a wait on this session is on its way (send_cancel).
  std::shared_ptr<std::atomic<bool>> cancelling = std::make_shared<std::atomic<bool>>(false);
  bool fresh = true;       // not checked out before (whoever checks it out reads and clears it)
  // Guarded by the pool's mutex:
  session_grants<grant> grants;
  bool in_use = false;
  bool probing = false;  // in_use by the keepalive
  bool watched = false;  // a loss check is posted or armed on the io thread
  bool broken = false;   // given up: never checked out again; its grants are lost
  std::chrono::steady_clock::time_point probe_sent{};
  // The io thread's wait on the socket, only while it watches or probes; io thread only.
  std::optional<boost::asio::posix::stream_descriptor> socket;
};

/// Ends the io thread's wait on `session`'s socket, leaving the descriptor to libpq.
void drop_socket(caller_session& session) noexcept;
/// Marks the grants whose lost signals these are lost.
void signal_all(std::vector<std::stop_source>& lost);

/// The caller-driven sessions of one provider.
///
/// A caller checks a session out for one attempt (never one that holds the attempt's resource:
/// advisory locks are re-entrant per session, nor one with locks_per_session grants) and
/// checks it in; a grant keeps its session until its release, which checks the same session
/// out again. The provider's io thread keeps the contract for them as the pool's keepalive does
/// for its sessions: it probes every idle session each half keepalive (which also resets the
/// server's idle_session_timeout), gives one up whose probe goes unanswered for a period, and
/// watches the socket of an idle session that holds grants (from watch_delay after its
/// check-in), so that a session the server ends (pg_terminate_backend, a restart) has its
/// grants marked lost at once. One idle session that holds nothing is kept; more are closed
/// at the next probe. A blocking acquire may also wait on one (check_out_for_wait): its
/// caller's thread then asks silent_for_wait() whether the server still answers.
class caller_sessions : public std::enable_shared_from_this<caller_sessions> {
 public:
  using session_ptr = std::shared_ptr<caller_session>;
  /// Runs the session's first statements (the server lease's settings) on a new connection by
  /// the deadline, and reads the session's backend_start; returns why it cannot be used, empty
  /// when it can.
  using preparer = std::function<std::string(
      PGconn*, std::chrono::steady_clock::time_point deadline, std::string& backend_start)>;

  /// Asks the server for an answer on another session, from the io thread: for when it has
  /// been silent and no caller-driven session is left to probe.
  using other_prober = std::function<void(std::function<void(bool answered)>)>;

  caller_sessions(boost::asio::any_io_executor executor, const options& opts,
                  std::string endpoint, preparer prepare, other_prober probe_elsewhere);

  /// Since when the server has left a probe of these sessions unanswered for half a period or
  /// more, until it answers again (nullopt: it answers). Any thread.
  std::optional<std::chrono::steady_clock::time_point> silent_since() const noexcept;

  /// Starts the keepalive on the io thread.
  void start();

  /// A session checked out for an attempt of `resource`, opened (blocking, at most
  /// connect_timeout) when none is free; nullptr with the reason in `why` when none can be
  /// opened, with `why` empty when the descriptor `wakeup` (-1: none) became readable while
  /// it connected (a stop request). Callers' threads.
  session_ptr check_out(const std::string& resource, std::string& why, int wakeup = -1);

  /// The same for a wait, which keeps its session busy until it ends: one that holds nothing
  /// (a release of its grants would wait for the wait).
  session_ptr check_out_for_wait(std::string& why, int wakeup);

  /// A caller's thread waits on a session from `since` (until wait_ended()): the io thread
  /// then asks the server for an answer at every tick of the keepalive, on another session,
  /// since the waiting one cannot answer.
  void wait_began();
  void wait_ended() noexcept;

  /// True once the server has answered nothing for a whole keepalive period, counted from
  /// `since` if later: a wait begun then is to be given up. Any thread.
  bool silent_for_wait(std::chrono::steady_clock::time_point since) const noexcept;

  /// Gives a checked-out session back; a session holding grants is watched from then on.
  void check_in(const session_ptr& session);

  /// Ends a checked-out session: the server frees what it held, its grants are marked lost.
  void give_up(const session_ptr& session);

  /// Books a grant on a checked-out session; returns its id.
  std::uint64_t add_grant(caller_session& session, caller_session::grant grant);

  /// Gives the grant back with `unlock_sql` on the caller's thread, waiting at most `timeout`
  /// for the session and the server. Returns the error, empty on success (a session that is
  /// gone freed its locks with it).
  std::string release(const session_ptr& session, std::uint64_t grant_id,
                      const std::string& unlock_sql, std::chrono::nanoseconds timeout);

  /// The same from the io thread, in the background; `failed` gets an error message.
  void release_in_background(session_ptr session, std::uint64_t grant_id, std::string unlock_sql,
                             std::function<void(std::string)> failed);

  /// Closes every session: for the backend's destructor, once its thread has stopped.
  void close_all();

 private:
  session_ptr check_out_where(const std::function<bool(const caller_session&)>& usable,
                              std::string& why, int wakeup);
  void heard() noexcept;
  void schedule();
  void probe();
  void sweep();
  void watch(const session_ptr& session);
  void examine(const session_ptr& session);
  void release_from_io(session_ptr session, std::uint64_t grant_id, std::string unlock_sql,
                       std::function<void(std::string)> failed);
  void exchange_on_io(const session_ptr& session, std::string sql,
                      std::function<void(query_result)> done);
  void read_on_io(const session_ptr& session, std::shared_ptr<query_result> collected,
                  std::function<void(query_result)> done);
  std::vector<std::stop_source> break_locked(caller_session& session);
  void close_on_io(const session_ptr& session);
  void check_in_locked(const session_ptr& session);

  boost::asio::any_io_executor executor_;
  std::string endpoint_;
  connection_parameters parameters_;
  std::chrono::nanoseconds connect_timeout_;
  std::chrono::nanoseconds keepalive_;
  std::uint32_t locks_per_session_;
  preparer prepare_;
  other_prober probe_elsewhere_;
  bool probing_elsewhere_ = false;  // io thread only
  // silent_since() as steady_clock ticks, 0 while the server answers.
  std::atomic<std::int64_t> silent_since_{0};
  // The server's last answer to a probe or a new session, as steady_clock ticks.
  std::atomic<std::int64_t> heard_{0};
  std::atomic<int> waits_{0};  // callers' threads waiting on a session
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

}  // namespace dlock::postgres::detail
