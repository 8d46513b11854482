// The validity of zk_session's grants (session.hpp): until when the ensemble is known to keep
// the session, and with it every ephemeral node the provider holds.
//
// The ensemble expires a session t (the negotiated session timeout) after it last heard from
// the client, and no earlier. What the client knows for sure is when it sent a request that
// the server answered: the server heard it then or later. So a grant is known valid until the
// sending of the last read the server answered, plus t, less a drift allowance for the hosts'
// clock rates (1 % plus 2 ms, as Redis's). Counting from the answer's arrival instead would
// overstate it by up to a round trip: the server may have heard the request that long before.
//
// The session sends such a read (an exists on its root) every t/6 while connected, and one
// at once on connecting, so that the validity stays at least 5t/6 ahead less a round trip.
// The C client's own pings cannot serve: it does not say when it sent them. A new session's
// validity starts with its handshake, which the client sends no earlier than its opening.
#include <utility>

#include "session.hpp"

namespace dlock::zookeeper::detail {

namespace {

std::chrono::nanoseconds valid_span(std::chrono::nanoseconds session_timeout) {
  return session_timeout - session_timeout / 100 - std::chrono::milliseconds(2);
}

}  // namespace

void zk_session::new_validity() {
  opened_at_ = std::chrono::steady_clock::now();
  handle_fresh_ = true;
  validity_.store(std::make_shared<grant_validity>(std::chrono::steady_clock::time_point::min()));
}

void zk_session::validity_connected() {
  if (std::exchange(handle_fresh_, false)) {
    validity_.load()->extend_to(opened_at_ + valid_span(negotiated_timeout_));
  }
  probe_validity();
  if (!std::exchange(validity_ticking_, true)) schedule_validity_probe();
}

void zk_session::schedule_validity_probe() {
  validity_timer_.expires_after(negotiated_timeout_ / 6);
  validity_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    if (self->phase_ == phase::connected) self->probe_validity();
    self->schedule_validity_probe();
  });
}

// The answer renews the validity of the session it was sent in (one that expired meanwhile
// answers nothing), on whichever thread reads it: the io thread may be the one held up. One
// read is out at a time; one unanswered for a session timeout (its session gone, its answer
// never to come) no longer holds the next back.
void zk_session::probe_validity() {
  const auto sent = std::chrono::steady_clock::now();
  const std::int64_t ticks = sent.time_since_epoch().count();
  std::int64_t out = validity_probe_out_.load();
  if (out != 0 && sent - std::chrono::steady_clock::time_point(
                             std::chrono::steady_clock::duration(out)) < negotiated_timeout_) {
    return;
  }
  if (!validity_probe_out_.compare_exchange_strong(out, ticks)) return;
  exists(
      "/",
      [weak = weak_from_this(), validity = validity_.load(), sent, ticks,
       span = valid_span(negotiated_timeout_)](zk_reply reply) {
        if (reply.rc == ZOK || reply.rc == ZNONODE || reply.rc == ZNOAUTH) {
          validity->extend_to(sent + span);  // any answer of the server's
        }
        auto self = weak.lock();
        std::int64_t mine = ticks;
        if (self) self->validity_probe_out_.compare_exchange_strong(mine, 0);
      },
      nullptr, nullptr, true);
}

}  // namespace dlock::zookeeper::detail
