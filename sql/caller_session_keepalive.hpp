// Private to the SQL backends: the keepalive of the caller-driven sessions
// (caller_session_pool.hpp), on the io thread. Idle sessions are probed every half keepalive
// period (one that does not answer within it is given up and its grants are marked lost, and
// the probe marks lost the grants the server says the session no longer holds), and an idle
// session that holds grants has its socket watched, so that a server that ends it is heard at
// once rather than at the next probe. An answered probe also renews the session's validity
// (caller_session_pool::validity_of_grant).
#pragma once

#include <vector>

#include "caller_session_pool.hpp"

namespace dlock {

template <typename Driver>
void caller_session_pool<Driver>::schedule() {
  timer_.expires_after(limits_.keepalive / 2);
  timer_.async_wait([weak = this->weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->probe();
    self->schedule();
  });
}

template <typename Driver>
void caller_session_pool<Driver>::probe() {
  const auto now = std::chrono::steady_clock::now();
  const auto period = limits_.keepalive;
  struct probe_of {
    session_ptr to;
    std::vector<std::uint64_t> ids;
    std::string sql;
  };
  std::vector<probe_of> to_probe;
  std::vector<session_ptr> to_close;
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    bool spare_kept = false;
    for (auto& s : sessions_) {
      if (s->broken) continue;
      if (s->probing) {
        if (now - s->probe_sent >= period / 2) {
          std::int64_t answering = 0;
          silent_since_.compare_exchange_strong(
              answering, s->probe_sent.time_since_epoch().count(), std::memory_order_relaxed);
        }
        if (now - s->probe_sent >= period) {
          auto signals = break_locked(*s);
          lost.insert(lost.end(), signals.begin(), signals.end());
          to_close.push_back(s);
        }
        continue;
      }
      if (s->in_use) continue;  // a caller's statement is bounded by its own deadline
      if (s->grants.empty()) {
        if (spare_kept) {
          s->broken = true;
          to_close.push_back(s);
          continue;
        }
        spare_kept = true;
      }
      s->in_use = s->probing = true;
      s->probe_sent = now;
      // The probe names the grants as they are now; one released or added meanwhile is
      // judged at the next probe.
      probe_of next{s, {}, {}};
      std::vector<const grant*> grants;
      for (const auto& [id, g] : s->grants) {
        next.ids.push_back(id);
        grants.push_back(&g);
      }
      next.sql = driver_.probe_sql(grants);
      to_probe.push_back(std::move(next));
    }
    std::erase_if(sessions_, [](const auto& s) { return s->broken; });
    // Silent, with nothing left to probe: is the server back? Asked on another session, so
    // that health() recovers without waiting for the next acquire. And while callers wait
    // (their sessions cannot answer): does the server still answer at all?
    const bool silent_and_alone =
        sessions_.empty() && silent_since_.load(std::memory_order_relaxed) != 0;
    if ((silent_and_alone || waits_.load(std::memory_order_relaxed) > 0) && probe_elsewhere_ &&
        !probing_elsewhere_) {
      probing_elsewhere_ = true;
      const auto sent = std::chrono::steady_clock::now();
      probe_elsewhere_([weak = this->weak_from_this(), silent_and_alone, sent](bool answered) {
        auto self = weak.lock();
        if (!self) return;
        self->probing_elsewhere_ = false;
        if (!answered) return;
        if (silent_and_alone) self->silent_since_.store(0, std::memory_order_relaxed);
        self->answers_.heard(sent);
      });
    }
  }
  if (!to_close.empty()) returned_.notify_all();
  for (auto& s : to_close) close_on_io(s);
  signal_all(lost);
  for (auto& next : to_probe) {
    exchange_on_io(next.to, std::move(next.sql),
                   [weak = this->weak_from_this(), s = next.to, ids = next.ids](result r) {
                     if (auto self = weak.lock()) self->probe_answered(s, ids, r);
                   });
  }
}

template <typename Driver>
void caller_session_pool<Driver>::probe_answered(const session_ptr& s,
                                                 const std::vector<std::uint64_t>& ids,
                                                 const result& r) {
  if (!r.ok()) {
    give_up(s);
    return;
  }
  silent_since_.store(0, std::memory_order_relaxed);
  answers_.probe_answered(*s->validity, s->probe_sent);
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto held = s->grants.find(ids[i]);
      if (held != s->grants.end() && !driver_.still_held(r, i)) lost.push_back(held->second.lost);
    }
    s->probing = false;
    check_in_locked(s);
  }
  returned_.notify_all();
  signal_all(lost);
}

template <typename Driver>
void caller_session_pool<Driver>::sweep() {
  std::vector<session_ptr> unwatched;
  {
    std::lock_guard lock(mutex_);
    sweep_pending_ = false;
    for (auto& s : sessions_) {
      if (s->broken || s->in_use || s->watched || s->grants.empty()) {
        continue;  // one in use is swept again once it is checked in
      }
      s->watched = true;
      unwatched.push_back(s);
    }
  }
  for (auto& s : unwatched) watch(s);
}

// Io thread. The descriptor is registered for this wait only: the callers' own traffic on the
// socket then wakes the io thread at most once per check-in. Registering it reports a socket
// that became readable before (the session ended between the check-in and now).
template <typename Driver>
void caller_session_pool<Driver>::watch(const session_ptr& s) {
  int fd = -1;
  {
    std::lock_guard lock(mutex_);
    if (s->broken || s->in_use || s->grants.empty()) {
      s->watched = false;  // the next check-in watches it again
      return;
    }
    if (s->socket) return;  // already watched
    fd = Driver::socket(s->conn);
  }
  s->socket.emplace(executor_, fd);
  s->socket->async_wait(boost::asio::posix::descriptor_base::wait_read,
                        [weak = this->weak_from_this(), s](boost::system::error_code ec) {
                          if (ec) return;  // closed, or taken over by a probe
                          s->drop_socket();
                          if (auto self = weak.lock()) self->examine(s);
                        });
}

// Something came on an idle session's socket, or the caller's own traffic did: only an idle
// session is looked at, and one the server ended is given up. The look never blocks, so it is
// made under the mutex rather than with the session checked out, which would send a caller
// that wants the session right then to open another.
template <typename Driver>
void caller_session_pool<Driver>::examine(const session_ptr& s) {
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    s->watched = false;
    if (s->broken || s->in_use || s->grants.empty()) return;
    const bool alive = Driver::still_open(s->conn);
    if (alive) s->watched = true;  // again, at once
    if (!alive) {
      lost = break_locked(*s);
      std::erase(sessions_, s);
    }
  }
  if (!s->broken) {  // only this thread and the holder of in_use change it
    watch(s);
    return;
  }
  returned_.notify_all();
  close_on_io(s);
  signal_all(lost);
}

}  // namespace dlock
