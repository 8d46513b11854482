#include "lease_keeper.hpp"

#include <utility>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::etcd::detail {

namespace {

// How soon a keepalive goes out on a new stream after the old one broke.
constexpr auto reopen_delay = std::chrono::milliseconds(250);

std::int64_t whole_seconds(std::chrono::nanoseconds ttl) {
  return std::chrono::duration_cast<std::chrono::seconds>(ttl).count();
}

}  // namespace

lease_keeper::lease_keeper(etcd_backend& backend, etcd_client& client)
    : backend_(backend),
      client_(client),
      ttl_(std::chrono::seconds(whole_seconds(backend.settings().lease_ttl))),
      timer_(backend.executor()),
      reopen_timer_(backend.executor()) {}

void lease_keeper::start() {
  blocking_reply<std::int64_t> reply;
  boost::asio::post(backend_.executor(), [self = shared_from_this(), reply] {
    self->with_lease([reply](std::exception_ptr error, std::int64_t id) {
      if (error) return void(reply.set_error(error));
      reply.set_value(std::move(id));
    });
  });
  // The grant itself gives up after connect_timeout; the margin covers the thread hops.
  if (!reply.get_for(backend_.settings().connect_timeout + std::chrono::seconds(1))) {
    throw connection_error(backend_.message("no lease granted within connect_timeout"));
  }
}

void lease_keeper::with_lease(lease_handler done) {
  if (lease_) return done(nullptr, *lease_);
  waiting_.push_back(std::move(done));
  if (!granting_) grant();
}

void lease_keeper::grant() {
  granting_ = true;
  // The server starts the lease's TTL when it grants it, after this: kept_until() counts
  // from here.
  grant_sent_ = std::chrono::steady_clock::now();
  pb::LeaseGrantRequest request;
  request.set_ttl(whole_seconds(ttl_));
  client_.grant(std::move(request), backend_.settings().connect_timeout,
                [self = shared_from_this()](grpc::Status status, pb::LeaseGrantResponse response) {
                  self->on_granted(std::move(status), response);
                });
}

void lease_keeper::on_granted(grpc::Status status, const pb::LeaseGrantResponse& response) {
  granting_ = false;
  std::exception_ptr error;
  if (!status.ok()) {
    error = std::make_exception_ptr(
        connection_error(backend_.message("granting a lease failed: " + describe(status))));
  } else if (!response.error().empty()) {
    error = std::make_exception_ptr(
        connection_error(backend_.message("granting a lease failed: " + response.error())));
  } else {
    lease_ = response.id();
    unanswered_.clear();
    validity_ = std::make_shared<grant_validity>(grant_sent_ + ttl_);
    set_answered(grant_sent_);
    tick();
  }
  if (error && !lost_why_.empty()) regrant_later();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& done : waiting) done(error, error ? 0 : *lease_);
}

void lease_keeper::tick() {
  if (!lease_) return;
  const auto now = std::chrono::steady_clock::now();
  // Unanswered for a TTL: etcd may have expired it by now (no earlier than now, see above).
  if (now - answered_sent_ >= ttl_) {
    return lose(*lease_, "no keepalive of the lease answered for its TTL of " +
                             std::to_string(whole_seconds(ttl_)) + "s");
  }
  send_keepalive();
  timer_.expires_after(std::min<std::chrono::steady_clock::duration>(
      ttl_ / 3, answered_sent_ + ttl_ - now));
  timer_.async_wait([self = weak_from_this()](boost::system::error_code ec) {
    if (auto me = self.lock(); me && !ec) me->tick();
  });
}

void lease_keeper::send_keepalive() {
  if (!stream_) {
    auto self = weak_from_this();
    // Weak: the stream keeps its handlers, so a strong pointer here would keep it forever.
    auto opened = std::make_shared<std::weak_ptr<stream>>();
    stream_ = stream::open(
        client_,
        [this](grpc::ClientContext* context, stream* reactor) {
          client_.lease_stub().async()->LeaseKeepAlive(context, reactor);
        },
        [self](pb::LeaseKeepAliveResponse response) {
          if (auto me = self.lock()) me->on_keepalive(response);
        },
        [self, opened](grpc::Status) {
          // Keepalives unanswered on this stream stay so; a new one goes out shortly (a
          // restarted member is back within a second or so), not only at the next tick.
          auto me = self.lock();
          auto ended = opened->lock();
          if (!me || !ended || me->stream_ != ended) return;
          me->stream_.reset();
          me->reopen_timer_.expires_after(reopen_delay);
          me->reopen_timer_.async_wait([self](boost::system::error_code ec) {
            auto keeper = self.lock();
            if (!ec && keeper && keeper->lease_ && !keeper->stream_) keeper->send_keepalive();
          });
        });
    *opened = stream_;
    unanswered_.clear();
  }
  pb::LeaseKeepAliveRequest request;
  request.set_id(*lease_);
  unanswered_.push_back(std::chrono::steady_clock::now());
  stream_->write(std::move(request));
  for (const std::int64_t hold : holds_) {
    pb::LeaseKeepAliveRequest renew;
    renew.set_id(hold);
    stream_->write(std::move(renew));
  }
}

void lease_keeper::on_keepalive(const pb::LeaseKeepAliveResponse& response) {
  // A hold's lease that expired took its key along: the holder's watch sees the delete.
  if (holds_.count(response.id()) && response.ttl() <= 0) holds_.erase(response.id());
  if (!lease_ || response.id() != *lease_) return;
  if (response.ttl() <= 0) return lose(*lease_, "the lease expired at the server");
  if (unanswered_.empty()) return;
  set_answered(unanswered_.front());
  unanswered_.pop_front();
}

std::uint64_t lease_keeper::listen(std::int64_t lease_id, lost_handler on_lost) {
  const std::uint64_t id = next_listener_++;
  listeners_.emplace(id, listener{lease_id, std::move(on_lost)});
  return id;
}

void lease_keeper::forget(std::uint64_t listener) { listeners_.erase(listener); }

std::chrono::steady_clock::time_point lease_keeper::kept_until() const {
  if (!lease_) return std::chrono::steady_clock::time_point::min();
  // The server received the keepalive after it was sent and keeps the lease a TTL from then.
  return answered_sent_ + ttl_;
}

std::shared_ptr<const grant_validity> lease_keeper::validity_of(std::int64_t lease_id) const {
  if (lease_ == lease_id) return validity_;
  return std::make_shared<grant_validity>(std::chrono::steady_clock::time_point::min());
}

void lease_keeper::lease_gone(std::int64_t lease_id) {
  if (lease_ == lease_id) lose(lease_id, "the lease is gone at the server");
}

void lease_keeper::lose(std::int64_t lease_id, const std::string& why) {
  if (lease_ != lease_id) return;
  lease_.reset();
  validity_.reset();
  // Their holders are lost with this lease; their holds run out on their own, at least their
  // TTL (no shorter than the hold) after the last keepalive.
  holds_.clear();
  timer_.cancel();
  reopen_timer_.cancel();
  if (stream_) stream_->cancel();
  stream_.reset();
  // If the server still has it, its keys would block others until it expires.
  pb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  client_.revoke(std::move(request), ttl_, [](grpc::Status, pb::LeaseRevokeResponse) {});
  {
    std::lock_guard lock(trouble_mutex_);
    kept_answered_.reset();
    lost_why_ = why;
  }
  regrant_later();
  const auto error = std::make_exception_ptr(connection_error(backend_.message(why)));
  std::vector<lost_handler> handlers;
  for (auto it = listeners_.begin(); it != listeners_.end();) {
    if (it->second.lease_id != lease_id) {
      ++it;
      continue;
    }
    handlers.push_back(std::move(it->second.on_lost));
    it = listeners_.erase(it);
  }
  for (auto& on_lost : handlers) on_lost(error);
}

// A provider keeps a lease even while it holds nothing, so that its health recovers with the
// cluster and the next acquire does not wait for a grant.
void lease_keeper::regrant_later() {
  reopen_timer_.expires_after(reopen_delay);
  reopen_timer_.async_wait([self = weak_from_this()](boost::system::error_code ec) {
    auto keeper = self.lock();
    if (!ec && keeper && !keeper->lease_ && !keeper->granting_) keeper->grant();
  });
}

void lease_keeper::set_answered(std::chrono::steady_clock::time_point sent) {
  answered_sent_ = sent;
  if (validity_) validity_->extend_to(sent + ttl_);
  std::lock_guard lock(trouble_mutex_);
  kept_answered_ = sent;
  lost_why_.clear();
}

std::optional<std::string> lease_keeper::trouble() const {
  std::lock_guard lock(trouble_mutex_);
  if (!kept_answered_) {
    if (lost_why_.empty()) return std::nullopt;  // not granted yet, or revoked on shutdown
    return "the lease was lost (" + lost_why_ + ") and no new one is granted yet";
  }
  // Keepalives go out every TTL/3 and are answered in a round trip.
  const auto silent = std::chrono::steady_clock::now() - *kept_answered_;
  if (silent <= ttl_ / 3 + std::chrono::milliseconds(500)) return std::nullopt;
  return "no keepalive of the lease answered for " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
         " ms (it is lost after its TTL of " + std::to_string(whole_seconds(ttl_)) + " s)";
}

void lease_keeper::revoke(std::chrono::nanoseconds timeout) {
  timer_.cancel();
  reopen_timer_.cancel();
  if (stream_) stream_->cancel();
  stream_.reset();
  if (!lease_) return;
  (void)client_.revoke_now(*std::exchange(lease_, std::nullopt), timeout);
}

}  // namespace dlock::etcd::detail
