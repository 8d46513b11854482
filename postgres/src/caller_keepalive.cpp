// The keepalive of the caller-driven sessions, on the io thread: idle sessions are probed every
// half keepalive period (one that does not answer within it is given up, and its grants are
// marked lost), and an idle session that holds grants has its socket watched, so that a server
// that ends it is heard at once rather than at the next probe.
#include <vector>

#include "caller_sessions.hpp"

namespace dlock::postgres::detail {

void caller_sessions::schedule() {
  timer_.expires_after(keepalive_ / 2);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->probe();
    self->schedule();
  });
}

void caller_sessions::probe() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<session_ptr> to_probe, to_close;
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    bool spare_kept = false;
    for (auto& session : sessions_) {
      if (session->broken) continue;
      if (session->probing) {
        if (now - session->probe_sent >= keepalive_ / 2) {
          std::int64_t answering = 0;
          silent_since_.compare_exchange_strong(
              answering, session->probe_sent.time_since_epoch().count(),
              std::memory_order_relaxed);
        }
        if (now - session->probe_sent >= keepalive_) {
          auto signals = break_locked(*session);
          lost.insert(lost.end(), signals.begin(), signals.end());
          to_close.push_back(session);
        }
        continue;
      }
      if (session->in_use) continue;  // a caller's statement is bounded by its own deadline
      if (session->grants.empty()) {
        if (spare_kept) {
          session->broken = true;
          to_close.push_back(session);
          continue;
        }
        spare_kept = true;
      }
      session->in_use = session->probing = true;
      session->probe_sent = now;
      to_probe.push_back(session);
    }
    std::erase_if(sessions_, [](const auto& s) { return s->broken; });
    // Silent, with nothing left to probe: is the server back? Asked on another session, so
    // that health() recovers without waiting for the next acquire. And while callers wait
    // (their sessions cannot answer): does the server still answer at all?
    const bool silent_and_alone =
        sessions_.empty() && silent_since_.load(std::memory_order_relaxed) != 0;
    if ((silent_and_alone || waits_.load(std::memory_order_relaxed) > 0) && !probing_elsewhere_) {
      probing_elsewhere_ = true;
      probe_elsewhere_([weak = weak_from_this(), silent_and_alone](bool answered) {
        auto self = weak.lock();
        if (!self) return;
        self->probing_elsewhere_ = false;
        if (!answered) return;
        if (silent_and_alone) self->silent_since_.store(0, std::memory_order_relaxed);
        self->heard();
      });
    }
  }
  if (!to_close.empty()) returned_.notify_all();
  for (auto& session : to_close) close_on_io(session);
  signal_all(lost);
  for (auto& session : to_probe) {
    exchange_on_io(session, "SELECT 1", [weak = weak_from_this(), session](query_result r) {
      auto self = weak.lock();
      if (!self) return;
      if (!r.ok()) {
        self->give_up(session);
        return;
      }
      self->silent_since_.store(0, std::memory_order_relaxed);
      self->heard();
      {
        std::lock_guard lock(self->mutex_);
        session->probing = false;
        self->check_in_locked(session);
      }
      self->returned_.notify_all();
    });
  }
}

// Io thread. The descriptor is registered for this wait only: the callers' own traffic on the
// socket then wakes the io thread at most once per check-in. Registering it reports a socket
// that became readable before (the session ended between the check-in and now).
void caller_sessions::watch(const session_ptr& session) {
  int fd = -1;
  {
    std::lock_guard lock(mutex_);
    if (session->broken || session->in_use || session->grants.empty()) {
      session->watched = false;  // the next check-in watches it again
      return;
    }
    if (session->socket) return;  // already watched
    fd = PQsocket(session->conn);
  }
  session->socket.emplace(executor_, fd);
  session->socket->async_wait(boost::asio::posix::descriptor_base::wait_read,
                              [weak = weak_from_this(), session](boost::system::error_code ec) {
                                if (ec) return;  // closed, or taken over by a probe
                                drop_socket(*session);
                                if (auto self = weak.lock()) self->examine(session);
                              });
}

// Something came on an idle session's socket, or the caller's own traffic did: only an idle
// session is read, and one the server ended is given up. The read never blocks, so it is made
// under the mutex rather than with the session checked out, which would send a caller that
// wants the session right then to open another.
void caller_sessions::examine(const session_ptr& session) {
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    session->watched = false;
    if (session->broken || session->in_use || session->grants.empty()) return;
    const bool alive =
        PQconsumeInput(session->conn) && PQstatus(session->conn) != CONNECTION_BAD;
    if (alive) session->watched = true;  // again, at once
    if (!alive) {
      lost = break_locked(*session);
      std::erase(sessions_, session);
    }
  }
  if (!session->broken) {  // only this thread and the holder of in_use change it
    watch(session);
    return;
  }
  returned_.notify_all();
  close_on_io(session);
  signal_all(lost);
}

}  // namespace dlock::postgres::detail
