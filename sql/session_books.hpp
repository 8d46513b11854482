// Private to the SQL backends (dlock::postgres and dlock::mysql): the books of a pool of SQL
// sessions, for backends that hold many locks per connection.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace dlock {

/// The sessions of one provider and the grants they carry: which session is reserved for a
/// wait, which holds nothing and may close, and which grants a broken session takes with it.
///
/// `Derived` (CRTP) is the backend's pool: it derives from std::enable_shared_from_this and
/// has open_session(), which opens a session, adds it to sessions_ and returns it. A `Session`
/// has `reserved`, `grants` (a session_grants of `Session::grant`, which has a std::stop_source
/// `lost`) and a `connection` with broken(), busy(), close(), abandon(std::string) and
/// execute(sql, handler(result)), the result having ok(), connection_broken and message.
/// One spare session that holds nothing is kept; more are closed. The pool's thread only.
template <typename Derived, typename Session>
class session_books {
 public:
  using session_ptr = std::shared_ptr<Session>;

  /// A session that holds nothing, reserved for a waiting acquire.
  session_ptr session_for_wait() {
    forget_broken_sessions();
    for (auto& session : sessions_) {
      if (!session->reserved && session->grants.empty() && !session->connection->busy()) {
        session->reserved = true;
        return session;
      }
    }
    auto session = self().open_session();
    session->reserved = true;
    return session;
  }

  /// Ends a wait's reservation; closes the session if it holds nothing and is not needed.
  void unreserve(const session_ptr& session) {
    session->reserved = false;
    retire_if_spare(session);
  }

  /// Closes `session` if it holds nothing, runs nothing and another such session is kept.
  void retire_if_spare(const session_ptr& session) {
    if (session->reserved || !session->grants.empty() || session->connection->busy()) return;
    const bool another_spare =
        std::any_of(sessions_.begin(), sessions_.end(), [&](const auto& s) {
          return s != session && !s->reserved && s->grants.empty() && !s->connection->broken();
        });
    if (!another_spare) return;
    std::erase(sessions_, session);
    session->connection->close();
  }

  /// Books `grant` on `session`; returns its id. Its `lost` is signalled when the session
  /// breaks.
  std::uint64_t add_grant(Session& session, typename Session::grant grant) {
    const std::uint64_t id = next_grant_id_++;
    session.grants.emplace(id, std::move(grant));
    return id;
  }

  /// Removes the grant and runs `unlock_sql` unless the session is gone (which freed it);
  /// `done` gets an error message, empty on success. An unlock that fails ends the session:
  /// the lock may still be held by it, but no longer in the books, and ending the session
  /// frees it (and marks the session's other handles lost).
  void release_grant(session_ptr session, std::uint64_t grant_id, std::string unlock_sql,
                     std::function<void(std::string error)> done) {
    session->grants.erase(grant_id);
    if (session->connection->broken()) {
      done({});  // the session ended, and the server freed its locks with it
      return;
    }
    session->connection->execute(
        std::move(unlock_sql),
        [weak = self().weak_from_this(), session, done = std::move(done)](auto r) {
          if (!r.ok() && !r.connection_broken) {
            session->connection->abandon("an unlock failed: " + r.message);
            done(r.message);
            return;
          }
          if (auto pool = weak.lock()) pool->retire_if_spare(session);
          done({});
        });
  }

  const std::vector<session_ptr>& sessions() const noexcept { return sessions_; }

  /// Closes every session: for the backend's destructor, once its thread has stopped.
  void close_all() {
    for (auto& session : sessions_) session->connection->close();
  }

 protected:
  /// Broken sessions have had their grants marked lost already (session_broken); a session
  /// that failed to connect or was closed after a cancelled wait just goes.
  void forget_broken_sessions() {
    std::erase_if(sessions_, [](const auto& s) { return s->connection->broken(); });
  }

  /// For the session's on_broken callback: forgets it and signals every grant on it lost.
  void session_broken(const session_ptr& session) {
    std::erase(sessions_, session);
    std::vector<std::stop_source> lost;
    for (auto& [id, grant] : session->grants) lost.push_back(grant.lost);
    for (auto& signal : lost) signal.request_stop();
  }

  std::vector<session_ptr> sessions_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  std::uint64_t next_grant_id_ = 1;
};

}  // namespace dlock
