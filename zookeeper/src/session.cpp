#include "session.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>

#include "option_checks.hpp"
#include "refusal_probe.hpp"

namespace dlock::zookeeper::detail {

struct session_watcher_context {
  std::weak_ptr<zk_session> session;
  boost::asio::any_io_executor executor;
};

namespace {

// Long enough for a loaded server to accept and close; it only lengthens a failing open.
constexpr std::chrono::milliseconds refusal_probe_wait{200};

// How often a connected session looks the hosts up again (DNS changes of the ensemble).
constexpr std::chrono::milliseconds resolution_interval{10'000};

// The C client logs to stderr by default, connection refusals included, once per attempt;
// dlock reports what matters through exceptions and the error hook instead.
void discard_client_log(const char*) {}

// libzookeeper_mt defines the same names as libzookeeper_st, so in a process that loaded both
// (a program, or a library it loads, linked the threaded client) the one loaded first serves
// every call, and the threaded one's own threads would race this backend's pump. Its
// synchronous calls are its alone, so finding one shows it.
bool threaded_client_loaded() { return ::dlsym(RTLD_DEFAULT, "zoo_multi") != nullptr; }

void session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* watcher = static_cast<session_watcher_context*>(context);
  // Only posts: it runs inside the client's processing, where an expiry cannot yet close the
  // handle.
  boost::asio::post(watcher->executor, [session = watcher->session, state] {
    if (auto self = session.lock()) self->on_session_event(state);
  });
}

}  // namespace

zk_session::zk_session(const dlock::backend& owner, const options& opts, std::vector<ACL> acl,
                       boost::asio::any_io_executor executor, std::function<void()> contact_lost)
    : owner_(owner),
      options_(opts),
      acl_entries_(std::move(acl)),
      executor_(std::move(executor)),
      contact_lost_(std::move(contact_lost)),
      pump_(std::make_shared<client_pump>(executor_,
                                          [executor = executor_] {
                                            const auto* io = executor.target<
                                                boost::asio::io_context::executor_type>();
                                            return io && io->running_in_this_thread();
                                          })),
      negotiated_timeout_(options_.session_timeout),
      disconnect_timer_(executor_),
      unreachable_grace_(executor_),
      validity_timer_(executor_) {
  acl_.count = static_cast<std::int32_t>(acl_entries_.size());
  acl_.data = acl_entries_.data();
}

zk_session::~zk_session() { close(); }

void zk_session::close() {
  if (zhandle_t* handle = pump_->stop()) zookeeper_close(handle);
}

bool zk_session::await(const std::function<bool(std::chrono::nanoseconds)>& answered,
                       std::chrono::steady_clock::time_point deadline) {
  using clock = std::chrono::steady_clock;
  if (pump_->on_io_thread()) {
    return pump_->run_until([&] { return answered(std::chrono::nanoseconds::zero()); },
                            deadline);
  }
  // The io thread answers within a millisecond unless something holds it up; only then does
  // this thread read the answers itself, a slice at a time.
  constexpr std::chrono::milliseconds help_after{5};
  constexpr std::chrono::milliseconds slice{2};
  const auto left = [&] { return std::max(clock::duration::zero(), deadline - clock::now()); };
  if (answered(std::min<clock::duration>(help_after, left()))) return true;
  while (left() > clock::duration::zero()) {
    pump_->help(slice);
    if (answered(std::min<clock::duration>(slice, left()))) return true;
  }
  return answered(std::chrono::nanoseconds::zero());
}

void zk_session::open_and_wait() {
  watcher_context_ = std::make_unique<session_watcher_context>(
      session_watcher_context{weak_from_this(), executor_});
  open();
  if (!first_connection_.get_for(options_.connect_timeout)) {
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.connect_timeout);
    // The C client never says why; a server that closes every connection at once does.
    throw connection_error(owner_.message(
        "no server of the ensemble answered within " + std::to_string(millis.count()) + " ms" +
        refusal_hint(options_.hosts, refusal_probe_wait)));
  }
}

void zk_session::open() {
  if (threaded_client_loaded()) {
    throw dlock::error(owner_.message(
        "this process also loads libzookeeper_mt, the C client's threaded build, which defines "
        "the same symbols as libzookeeper_st that dlock::zookeeper links; link only "
        "libzookeeper_st and make your own ZooKeeper calls with it (docs/zookeeper.md)"));
  }
  new_validity();  // before the handle exists, so before its handshake goes out
  // The endpoint is the connect string: the hosts, then the chroot.
  zhandle_t* handle = zookeeper_init2(owner_.endpoint().c_str(), session_watcher,
                                      milliseconds_of(options_.session_timeout), nullptr,
                                      watcher_context_.get(), 0, discard_client_log);
  if (!handle) {
    throw connection_error(
        owner_.message(std::string("cannot start a session: ") + std::strerror(errno)));
  }
  // Before the pump drives the handle, so that no other thread touches it meanwhile.
  // By default the client resolves the hosts again every time it is asked what it waits for:
  // a getaddrinfo() (a netlink socket, /etc/hosts, maybe DNS) per answer read. Connected, it
  // now resolves them at most every 10 s (it always does before connecting again).
  zoo_set_servers_resolution_delay(handle, static_cast<int>(resolution_interval.count()));
  if (!options_.user.empty()) {
    const std::string credentials = options_.user + ":" + options_.password;
    zoo_add_auth(handle, "digest", credentials.data(), static_cast<int>(credentials.size()),
                 nullptr, nullptr);
  }
  pump_->start(handle);
}

void zk_session::on_session_event(int state) {
  if (state == ZOO_CONNECTED_STATE) return on_connected();
  if (state == ZOO_EXPIRED_SESSION_STATE) return on_expired();
  if (state == ZOO_AUTH_FAILED_STATE) return on_auth_failed();
  if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) on_disconnected();
}

void zk_session::on_connected() {
  phase_ = phase::connected;
  if (std::exchange(connected_before_, true)) owner_.events().reconnected();
  disconnected_since_.store(0, std::memory_order_relaxed);
  // The server may have changed the session timeout to fit its [min, max] range. (On the io
  // thread, outside the client's processing: made at once.)
  pump_->submit([this](zhandle_t* handle) {
    if (handle && zoo_recv_timeout(handle) > 0) {
      negotiated_timeout_ = std::chrono::milliseconds(zoo_recv_timeout(handle));
    }
  });
  disconnect_timer_.cancel();
  unreachable_grace_.cancel();
  validity_connected();
  first_connection_.set_value(true);
  auto waiters = std::exchange(connect_waiters_, {});
  for (auto& waiter : waiters) waiter(nullptr);
  retry_pending_removes();
  sweep_orphans();
}

void zk_session::note_disconnection() noexcept {
  std::int64_t connected = 0;
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  disconnected_since_.compare_exchange_strong(connected, now, std::memory_order_relaxed);
}

std::optional<std::chrono::steady_clock::time_point> zk_session::disconnected_since()
    const noexcept {
  const std::int64_t since = disconnected_since_.load(std::memory_order_relaxed);
  if (since == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since));
}

void zk_session::on_auth_failed() {
  auto error = std::make_exception_ptr(
      connection_error(owner_.message("authentication failed for user '" + options_.user + "'")));
  first_connection_.set_error(error);
  fail_connect_waiters(error);
}

void zk_session::on_disconnected() {
  if (phase_ != phase::connected) return;
  phase_ = phase::disconnected;
  note_disconnection();
  start_disconnect_clock();
}

void zk_session::start_disconnect_clock() {
  // The ensemble expires a session it has not heard from for a session timeout t. The client
  // notices a silent connection only after 2t/3 without a reply, so the session may be gone t/3
  // after we learn of the disconnection: from then on holders must stop (we learn for sure
  // only when we reach a server again).
  // Acquires give up earlier, after t/6: a waiter risks nothing by waiting, but its caller
  // should hear of the outage, and t/6 is ample for a reconnection to another member (a few
  // milliseconds). Failing before the server may expire the session also means that a
  // heal soon after finds the session alive, and the failed acquire's node is deleted in it.
  disconnect_timer_.expires_after(negotiated_timeout_ / 6);
  disconnect_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->phase_ == phase::connected) return;
    self->on_unreachable();
    self->disconnect_timer_.expires_after(self->negotiated_timeout_ / 3 -
                                          self->negotiated_timeout_ / 6);
    self->disconnect_timer_.async_wait([weak](boost::system::error_code later) {
      auto session = weak.lock();
      if (!session || later || session->phase_ == phase::connected) return;
      session->contact_lost_();
    });
  });
}

void zk_session::on_unreachable() {
  phase_ = phase::unreachable;
  const auto error = [this] {
    return std::make_exception_ptr(
        connection_error(owner_.message("no server of the ensemble reachable")));
  };
  fail_connect_waiters(error());
  // After the connection waiters: an acquire that waited for a connection has failed already.
  for (auto& [id, waiter] : std::exchange(unreachable_waiters_, {})) waiter(error());
}

std::uint64_t zk_session::when_unreachable(std::function<void(std::exception_ptr)> then) {
  const auto id = ++next_unreachable_id_;
  unreachable_waiters_.emplace(id, std::move(then));
  return id;
}

void zk_session::forget_unreachable(std::uint64_t id) { unreachable_waiters_.erase(id); }

void zk_session::on_expired() {
  // Acquires wait for the new session as for a reconnection (up to t/6), even when the
  // outage that ended in the expiry had made the session unreachable.
  phase_ = phase::disconnected;
  note_disconnection();
  contact_lost_();
  // Ephemeral nodes went with the session: nothing of it is left to delete.
  pending_removes_.clear();
  orphans_.clear();
  if (zhandle_t* expired = pump_->stop()) zookeeper_close(expired);
  start_disconnect_clock();
  try {
    open();
  } catch (...) {
    owner_.events().background_error(std::current_exception());
  }
}

void zk_session::fail_connect_waiters(std::exception_ptr error) {
  auto waiters = std::exchange(connect_waiters_, {});
  for (auto& waiter : waiters) waiter(error);
}

void zk_session::when_connected(std::function<void(std::exception_ptr)> then) {
  if (phase_ == phase::connected) return then(nullptr);
  connect_waiters_.push_back(std::move(then));
  // Unreachable for a while, but the network may have healed a moment ago and the client not
  // have reconnected yet: an acquire right after a heal would fail at once. So the caller
  // waits as long as after a disconnection (t/6) before it hears that nothing answers.
  if (phase_ != phase::unreachable || connect_waiters_.size() > 1) return;
  unreachable_grace_.expires_after(negotiated_timeout_ / 6);
  unreachable_grace_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->phase_ != phase::unreachable) return;
    self->fail_connect_waiters(std::make_exception_ptr(
        connection_error(self->owner_.message("no server of the ensemble reachable"))));
  });
}

}  // namespace dlock::zookeeper::detail
