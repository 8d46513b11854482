#include "zookeeper_backend.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>
#include <dlock/core/backend/lease.hpp>
#include <dlock/core/backend/naming.hpp>

#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

namespace {

// Longer escaped names are cut and end in a hash (naming::escape_segment), as file names are:
// a node path stays readable, and well inside what a client's request buffer takes.
constexpr std::size_t max_escaped_bytes = 200;

// How long a withdrawn acquire waits for the server to confirm the deletion of its nodes.
constexpr auto abandon_wait = std::chrono::milliseconds(80);

bool is_connection_loss(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }
// The session this call belonged to is gone: its ephemeral nodes went with it.
bool is_session_gone(int rc) { return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE; }

std::string basename_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The C client logs to stderr by default, connection refusals included, once per attempt;
// dlock reports what matters through exceptions and the error hook instead.
void discard_client_log(const char*) {}

}  // namespace

struct session_watcher_context {
  std::weak_ptr<zookeeper_backend> backend;
  boost::asio::any_io_executor executor;
};

/// A granted node, watched until it is released: deleted by someone else, it is lost.
class zookeeper_lease final : public dlock::lease {
 public:
  zookeeper_lease(std::shared_ptr<zookeeper_backend> backend, std::string node,
                  std::string name, std::int64_t czxid)
      : lease(static_cast<std::uint64_t>(czxid)),
        backend_(std::move(backend)),
        node_(std::move(node)),
        name_(std::move(name)) {
    held_id_ = backend_->add_held(this);
  }
  ~zookeeper_lease() override {
    if (released_) return;
    backend_->remove_held(held_id_);
    backend_->remove(node_, [](zk_reply) {});
  }

  void release() override {
    released_ = true;
    backend_->remove_held(held_id_);
    backend_->remove_released(node_, name_);
  }

  std::uint64_t held_id() const noexcept { return held_id_; }

 private:
  std::shared_ptr<zookeeper_backend> backend_;
  std::string node_;
  std::string name_;
  std::uint64_t held_id_ = 0;
  bool released_ = false;
};

/// One acquire, as Curator's recipes do it. Runs on the io thread only; cancel() posts there.
///
/// A lock or reader-writer lock queues one node under the lock node. A semaphore first takes
/// the exclusive lock `<node>/locks`, then adds its lease under `<node>/leases` and waits
/// until at most max_count leases are there, then lets `<node>/locks` go
/// (InterProcessSemaphoreV2).
class zookeeper_acquire final : public acquire_operation,
                                public std::enable_shared_from_this<zookeeper_acquire> {
 public:
  zookeeper_acquire(std::shared_ptr<zookeeper_backend> backend, acquire_request request,
                    acquire_completion done)
      : backend_(std::move(backend)),
        request_(std::move(request)),
        done_(std::move(done)),
        executor_(backend_->executor()),
        abandon_timer_(executor_),
        stop_timer_(executor_) {
    const std::string node = backend_->node_of(request_.name);
    if (request_.kind == primitive::semaphore) {
      stages_.push_back({node + "/locks", lock_marker});
      stages_.push_back({node + "/leases", lease_marker});
    } else if (request_.kind == primitive::reader_writer_lock) {
      stages_.push_back(
          {node, request_.mode == lock_mode::shared ? read_marker : write_marker});
    } else {
      stages_.push_back({node, lock_marker});
    }
  }

  void start() {
    boost::asio::post(executor_, [self = shared_from_this()] { self->begin(); });
  }

  void cancel() noexcept override {
    boost::asio::post(executor_, [self = shared_from_this()] { self->on_cancel(); });
  }

 private:
  struct stage {
    std::string parent;
    std::string_view marker;
    std::string prefix;  // the protection prefix of the current create
    std::string node;    // our node, once created
    std::int64_t czxid = 0;
  };

  stage& current() { return stages_[stage_index_]; }
  bool leases_stage() const { return request_.kind == primitive::semaphore && stage_index_ == 1; }

  // The continuation of a call: while calls are out, a stop request waits for them (one may
  // be creating our node), and once the op is done their late answers are ignored.
  template <class Step>
  auto step(Step next) {
    ++calls_out_;
    return [self = shared_from_this(), next = std::move(next)](auto&&... args) mutable {
      --self->calls_out_;
      if (self->finished_) return;
      next(*self, std::forward<decltype(args)>(args)...);
    };
  }

  // The handler of a watch: what wakes a waiting op.
  zk_handler wake() {
    return [self = shared_from_this()](zk_reply event) {
      if (self->finished_) return;
      self->on_watch_event(event);
    };
  }

  void begin() {
    if (finished_) return;
    if (cancelled_) return abandon();
    drop_watch();
    for (stage& s : stages_) {
      // A node left from the attempt before (the semaphore's lock) must not block others.
      if (!s.node.empty()) backend_->remove(s.node, [](zk_reply) {});
      s = stage{s.parent, s.marker};
    }
    stage_index_ = 0;
    create_own();
  }

  void create_own() {
    current().prefix = new_protection_prefix();
    send_create();
  }

  void send_create() {
    backend_->when_connected(step([](zookeeper_acquire& self, std::exception_ptr error) {
      if (error) return self.fail(error);
      if (self.cancelled_) return self.abandon();
      stage& s = self.current();
      self.backend_->create(s.parent + "/" + s.prefix + std::string(s.marker), true,
                            self.step([](zookeeper_acquire& me, zk_reply reply) {
                              me.on_created(std::move(reply));
                            }));
      if (self.leases_stage()) return;
      // Pipelined: the server runs a session's requests in order, so this listing already
      // shows the node the create makes, and the grant costs one round trip less.
      const auto attempt = ++self.attempt_;
      self.pipelined_listing_ = attempt;
      self.backend_->get_children(s.parent, self.step([attempt](zookeeper_acquire& me,
                                                                zk_reply reply) {
                                    me.on_pipelined_listing(attempt, std::move(reply));
                                  }));
    }));
  }

  void on_created(zk_reply reply) {
    stage& s = current();
    if (reply.rc == ZOK) {
      s.node = std::move(reply.path);
      s.czxid = reply.czxid;
      if (pipelined_listing_ == attempt_ && pipelined_listing_ != 0) return;  // it follows
      if (cancelled_) return abandon();
      return after_create();
    }
    if (cancelled_ && calls_out_ == 0 && !is_connection_loss(reply.rc)) return abandon();
    if (reply.rc == ZNONODE) {
      // dlock records a semaphore's max_count as the data of its leases node.
      return backend_->ensure_path(s.parent, step([](zookeeper_acquire& self, zk_reply made) {
                                     if (made.rc == ZNONODE) return self.fail_missing_chroot();
                                     if (made.rc != ZOK) return self.on_call_failed(made.rc, "create");
                                     self.send_create();
                                   }),
                                   leases_stage() ? std::to_string(request_.max_count) : "");
    }
    // The create may have happened: look for our prefix before creating again (a second
    // node of ours would block everyone behind it until the session ends).
    if (is_connection_loss(reply.rc)) return find_own();
    on_call_failed(reply.rc, "create");
  }

  void find_own() {
    backend_->when_connected(step([](zookeeper_acquire& self, std::exception_ptr error) {
      if (error) return self.fail(error);
      self.backend_->get_children(
          self.current().parent, self.step([](zookeeper_acquire& me, zk_reply reply) {
            if (is_connection_loss(reply.rc)) return me.find_own();
            if (reply.rc == ZNONODE) return me.send_create();
            if (reply.rc != ZOK) return me.on_call_failed(reply.rc, "find");
            stage& s = me.current();
            auto ours = std::find_if(reply.children.begin(), reply.children.end(),
                                     [&](const std::string& c) { return c.starts_with(s.prefix); });
            if (ours == reply.children.end()) return me.send_create();
            s.node = s.parent + "/" + *ours;
            me.backend_->exists(s.node, me.step([](zookeeper_acquire& op, zk_reply found) {
                                  if (found.rc != ZOK) return op.on_call_failed(found.rc, "find");
                                  op.current().czxid = found.czxid;
                                  if (op.cancelled_) return op.abandon();
                                  op.after_create();
                                }));
          }));
    }));
  }

  /// The listing sent right behind a create. Its answer comes after the create's (one
  /// session's answers arrive in request order), unless the client refused it at once.
  void on_pipelined_listing(std::uint64_t attempt, zk_reply reply) {
    if (attempt != attempt_) return;
    pipelined_listing_ = 0;
    if (cancelled_) {
      if (calls_out_ == 0) abandon();
      return;
    }
    // The create failed (its own answer deals with that) or is still out (refused listing:
    // the create's answer lists again).
    if (current().node.empty()) return;
    on_queue(std::move(reply));
  }

  void after_create() {
    if (leases_stage()) return check_leases();
    check_queue();
  }

  void check_queue() {
    backend_->get_children(current().parent, step([](zookeeper_acquire& self, zk_reply reply) {
                             self.on_queue(std::move(reply));
                           }));
  }

  void on_queue(zk_reply reply) {
    if (cancelled_) return abandon();
    if (reply.rc != ZOK) return on_call_failed(reply.rc, "list");
    const stage& s = current();
    const std::string own = basename_of(s.node);
    const auto queue = queue_order(reply.children);
    auto ours = std::find_if(queue.begin(), queue.end(),
                             [&](const queued_node& n) { return n.name == own; });
    // Our node is gone (deleted by someone, or its session expired): queue again.
    if (ours == queue.end()) return begin();
    std::optional<std::string> predecessor;
    int blockers = 0;  // the nodes before ours that keep us waiting
    if (s.marker == read_marker) {
      // A reader waits only for the writers before it; it watches the nearest one.
      for (auto it = queue.begin(); it != ours; ++it) {
        if (it->excludes_readers) predecessor = it->name, ++blockers;
      }
    } else if (ours != queue.begin()) {
      predecessor = std::prev(ours)->name;
      blockers = static_cast<int>(ours - queue.begin());
    }
    if (!predecessor) return at_head_of_queue();
    if (!request_.wait) return abandon();
    note_waiting();
    // Nodes are only ever added behind ours, so once the one blocker we watch is deleted,
    // nothing is in our way any longer: the grant needs no second listing (a round trip less
    // per handoff).
    watched_last_blocker_ = blockers == 1;
    watch(s.parent + "/" + *predecessor);
  }

  void at_head_of_queue() {
    if (request_.kind == primitive::semaphore) {
      stage_index_ = 1;
      return create_own();
    }
    grant();
  }

  void check_leases() {
    if (!count_checked_) {
      // Pipelined before the listing: the count recorded with the leases, checked once.
      backend_->get_data(current().parent, step([](zookeeper_acquire& self, zk_reply reply) {
                           self.count_checked_ = true;
                           if (reply.rc != ZOK) return;  // the listing reports the failure
                           self.count_error_ = self.backend_->recorded_count_mismatch(
                               self.request_, reply.data, self.current().parent);
                         }));
    }
    zk_handler on_change = wake();
    backend_->get_children(current().parent, step([](zookeeper_acquire& self, zk_reply reply) {
                             self.on_leases(std::move(reply));
                           }),
                           &on_change, &watch_id_);
  }

  void on_leases(zk_reply reply) {
    if (cancelled_) return abandon();
    if (reply.rc != ZOK) return on_call_failed(reply.rc, "list");
    if (count_error_) return fail(std::exchange(count_error_, nullptr));
    const std::string own = basename_of(current().node);
    std::size_t leases = 0;
    bool found = false;
    for (const std::string& child : reply.children) {
      if (!is_lease_node(child)) continue;
      ++leases;
      found = found || child == own;
    }
    if (!found) return begin();
    if (leases <= request_.max_count) {
      // The lease is ours; the semaphore's lock only serialised the lease creation. Let it go
      // before completing, as Curator does, so that a one-shot attempt that follows ours never
      // finds it still taken.
      return backend_->remove(std::exchange(stages_[0].node, {}),
                              step([](zookeeper_acquire& self, zk_reply) { self.grant(); }));
    }
    if (!request_.wait) return abandon();
    note_waiting();  // the children watch set by check_leases wakes us
  }

  /// Waits for the predecessor `path` to go (or change).
  void watch(const std::string& path) {
    zk_handler on_change = wake();
    backend_->exists(path, step([](zookeeper_acquire& self, zk_reply reply) {
                       if (self.cancelled_) return self.abandon();
                       // Gone already: look again now. Present: the watch wakes us.
                       if (reply.rc == ZNONODE) return self.drop_watch(), self.check_queue();
                       if (reply.rc != ZOK) return self.drop_watch(), self.on_call_failed(reply.rc, "watch");
                     }),
                     &on_change, &watch_id_);
  }

  void on_watch_event(const zk_reply& event) {
    watch_id_ = 0;
    if (calls_out_ > 0) return;  // a call still out answers first and looks again anyway
    if (cancelled_) return abandon();
    if (event.event == ZOO_SESSION_EVENT) return begin();  // expired: queue again
    if (leases_stage()) return check_leases();
    if (event.event == ZOO_DELETED_EVENT && std::exchange(watched_last_blocker_, false)) {
      return at_head_of_queue();
    }
    check_queue();
  }

  void drop_watch() {
    if (watch_id_) drop_route(watch_id_);
    watch_id_ = 0;
  }

  void note_waiting() {
    if (waiting_) return;
    waiting_ = true;
    backend_->events().acquire_waiting();
  }

  void on_call_failed(int rc, std::string_view call) {
    if (is_connection_loss(rc)) {
      // Our node (if any) lives on with the session: carry on once reconnected.
      return backend_->when_connected(step([](zookeeper_acquire& self, std::exception_ptr error) {
        if (error) return self.fail(error);
        if (self.cancelled_) return self.abandon();
        if (self.current().node.empty()) return self.send_create();
        self.after_create();
      }));
    }
    if (is_session_gone(rc)) return begin();  // a new session takes over; queue again
    if (rc == ZNONODE) return begin();
    std::string what;
    if (rc == ZNOAUTH) {
      what = "not authorized to " + std::string(call) + " under " + current().parent +
             " (check the user, password and the node's ACL)";
    } else {
      what = std::string(call) + " under " + current().parent + " failed: " + zerror(rc);
    }
    fail(std::make_exception_ptr(connection_error(backend_->message(what, request_.name))));
  }

  // ensure_path creates every node from the top down, below the chroot: only a missing chroot
  // (which ZooKeeper does not let a chrooted client create) leaves a parent it cannot make.
  void fail_missing_chroot() {
    fail(std::make_exception_ptr(connection_error(backend_->message(
        "the chroot node " + backend_->settings().chroot + " does not exist (create it first)",
        request_.name))));
  }

  void on_cancel() {
    cancelled_ = true;
    if (finished_) return;
    if (calls_out_ == 0) return abandon();
    // The call out (it may be creating our node) cleans up when it answers, which may take
    // up to a session timeout when the server stalls; a stop request must end the wait
    // promptly all the same, so the caller hears after abandon_wait at most.
    stop_timer_.expires_after(abandon_wait);
    stop_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->finished_ || self->reported_) return;
      self->report(nullptr, nullptr);
    });
  }

  /// Deletes our nodes, then completes with no lease.
  /// Deletes our nodes, then completes with no lease: once the server confirms, so that a
  /// caller who lists the queue next finds them gone, but after abandon_wait at most, so that
  /// a stop request is prompt even when the server does not answer (a delete cut off by the
  /// connection is retried after reconnecting; a session expiry removes the nodes anyway).
  void abandon() {
    drop_watch();
    auto pending = std::make_shared<int>(0);
    for (stage& s : stages_) {
      if (s.node.empty()) continue;
      ++*pending;
      backend_->remove(std::exchange(s.node, {}), [self = shared_from_this(), pending](zk_reply) {
        if (--*pending == 0 && !self->finished_) self->finish(nullptr, nullptr);
      });
    }
    if (*pending == 0) return finish(nullptr, nullptr);
    abandon_timer_.expires_after(abandon_wait);
    abandon_timer_.async_wait([self = shared_from_this()](boost::system::error_code) {
      if (!self->finished_) self->finish(nullptr, nullptr);
    });
  }

  void fail(std::exception_ptr error) {
    drop_watch();
    for (stage& s : stages_) {
      if (!s.node.empty()) backend_->remove(std::exchange(s.node, {}), [](zk_reply) {});
    }
    finish(std::move(error), nullptr);
  }

  void grant() {
    drop_watch();
    stage& s = current();
    auto granted = std::make_unique<zookeeper_lease>(backend_, s.node, request_.name, s.czxid);
    backend_->watch_held(granted->held_id(), s.node);
    s.node.clear();
    finish(nullptr, std::move(granted));
  }

  void finish(std::exception_ptr error, std::unique_ptr<lease> granted) {
    finished_ = true;
    abandon_timer_.cancel();
    stop_timer_.cancel();
    if (reported_) {
      // The caller was told "not acquired" already: a late grant's node is deleted with the
      // lease here, before the backend goes.
      granted.reset();
      backend_.reset();
      return;
    }
    // As in core: let the caller, not this op, hold the last reference to the backend.
    backend_.reset();
    report(std::move(error), std::move(granted));
  }

  /// Completes the acquire for the caller (once); cleanup may still go on after it.
  void report(std::exception_ptr error, std::unique_ptr<lease> granted) {
    reported_ = true;
    auto done = std::move(done_);
    done(std::move(error), std::move(granted));
  }

  std::shared_ptr<zookeeper_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  boost::asio::any_io_executor executor_;
  boost::asio::steady_timer abandon_timer_;
  boost::asio::steady_timer stop_timer_;  // a stop request's answer while a call is out
  std::vector<stage> stages_;
  std::size_t stage_index_ = 0;
  std::uint64_t watch_id_ = 0;
  int calls_out_ = 0;
  bool watched_last_blocker_ = false;  // the predecessor watched is all that is in our way
  bool count_checked_ = false;          // a semaphore's recorded max_count was looked at
  std::exception_ptr count_error_;      // ... and differs from ours
  std::uint64_t attempt_ = 0;            // creates sent so far
  std::uint64_t pipelined_listing_ = 0;  // the attempt whose pipelined listing is still out
  bool waiting_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  bool reported_ = false;  // the caller has its answer (a stop request answered early)
};

namespace {

std::string join_hosts_and_chroot(const options& opts) { return opts.hosts + opts.chroot; }

void validate_absolute_path(std::string_view field, const std::string& path, bool allow_empty) {
  if (path.empty() && allow_empty) return;
  const bool bad = path.empty() || path.front() != '/' || path == "/" || path.back() == '/' ||
                   path.find("//") != std::string::npos || path.find('\0') != std::string::npos;
  if (bad) {
    throw std::invalid_argument("dlock: zookeeper provider: option '" + std::string(field) +
                                "' must be an absolute node path like /locks (not '/', no "
                                "trailing '/'), not '" + path + "'");
  }
}

void session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* watcher = static_cast<session_watcher_context*>(context);
  // Only posts: the C client's thread never runs recipe code nor owns the backend.
  boost::asio::post(watcher->executor, [backend = watcher->backend, state] {
    if (auto self = backend.lock()) self->on_session_event(state);
  });
}

}  // namespace

zookeeper_backend::zookeeper_backend(options opts)
    : options_(std::move(opts)) {
  if (options_.hosts.empty()) {
    throw std::invalid_argument("dlock: zookeeper provider: option 'hosts' must not be empty");
  }
  validate_absolute_path("base_path", options_.base_path, false);
  validate_absolute_path("chroot", options_.chroot, true);
  if (options_.session_timeout <= std::chrono::milliseconds::zero()) {
    throw std::invalid_argument(
        "dlock: zookeeper provider: option 'session_timeout' must be positive");
  }
  if (options_.connect_timeout <= std::chrono::milliseconds::zero()) {
    throw std::invalid_argument(
        "dlock: zookeeper provider: option 'connect_timeout' must be positive");
  }
  if (options_.acl != acl_policy::open && options_.user.empty()) {
    throw std::invalid_argument(
        "dlock: zookeeper provider: option 'acl' other than open needs a user and password");
  }
  if (options_.user.find(':') != std::string::npos) {
    throw std::invalid_argument("dlock: zookeeper provider: option 'user' must not contain ':'");
  }
  endpoint_ = join_hosts_and_chroot(options_);
  switch (options_.acl) {
    case acl_policy::open:
      acl_entries_.assign(ZOO_OPEN_ACL_UNSAFE.data, ZOO_OPEN_ACL_UNSAFE.data + ZOO_OPEN_ACL_UNSAFE.count);
      break;
    case acl_policy::creator_only:
      acl_entries_.assign(ZOO_CREATOR_ALL_ACL.data, ZOO_CREATOR_ALL_ACL.data + ZOO_CREATOR_ALL_ACL.count);
      break;
    case acl_policy::read_only_for_others:
      acl_entries_.assign(ZOO_CREATOR_ALL_ACL.data, ZOO_CREATOR_ALL_ACL.data + ZOO_CREATOR_ALL_ACL.count);
      acl_entries_.insert(acl_entries_.end(), ZOO_READ_ACL_UNSAFE.data,
                          ZOO_READ_ACL_UNSAFE.data + ZOO_READ_ACL_UNSAFE.count);
      break;
  }
  negotiated_timeout_ = options_.session_timeout;
  acl_.count = static_cast<std::int32_t>(acl_entries_.size());
  acl_.data = acl_entries_.data();
  disconnect_timer_.emplace(io().executor());
}

zookeeper_backend::~zookeeper_backend() {
  {
    std::lock_guard lock(handle_mutex_);
    // Joins the client's threads; completions still pending run now with ZCLOSING and find
    // their routes' executors stopping.
    if (handle_) zookeeper_close(handle_);
    handle_ = nullptr;
  }
  io().stop();
  disconnect_timer_.reset();
}

std::string zookeeper_backend::node_of(std::string_view name) const {
  return options_.base_path + "/" + naming::escape_segment(name, max_escaped_bytes, false);
}

void zookeeper_backend::start() {
  watcher_context_ = std::make_unique<session_watcher_context>(
      session_watcher_context{weak_from_this(), io().executor()});
  open_session();
  std::unique_lock lock(start_mutex_);
  const bool settled = started_.wait_for(lock, options_.connect_timeout,
                                         [&] { return start_connected_ || start_error_; });
  if (start_error_) std::rethrow_exception(start_error_);
  if (!settled) {
    throw connection_error("dlock: zookeeper " + endpoint_ + ": no server of the ensemble " +
                           "answered within " + std::to_string(options_.connect_timeout.count()) +
                           " ms");
  }
}

void zookeeper_backend::open_session() {
  zhandle_t* handle = zookeeper_init2(
      connect_string().c_str(), session_watcher, static_cast<int>(options_.session_timeout.count()),
      nullptr, watcher_context_.get(), 0, discard_client_log);
  if (!handle) {
    throw connection_error("dlock: zookeeper " + endpoint_ + ": cannot start a session: " +
                           std::strerror(errno));
  }
  if (!options_.user.empty()) {
    const std::string credentials = options_.user + ":" + options_.password;
    zoo_add_auth(handle, "digest", credentials.data(), static_cast<int>(credentials.size()),
                 nullptr, nullptr);
  }
  std::lock_guard lock(handle_mutex_);
  handle_ = handle;
}

std::string zookeeper_backend::connect_string() const { return endpoint_; }

void zookeeper_backend::on_session_event(int state) {
  if (state == ZOO_CONNECTED_STATE) return on_connected();
  if (state == ZOO_EXPIRED_SESSION_STATE) return on_expired();
  if (state == ZOO_AUTH_FAILED_STATE) {
    auto error = std::make_exception_ptr(connection_error(
        "dlock: zookeeper " + endpoint_ + ": authentication failed for user '" + options_.user +
        "'"));
    {
      std::lock_guard lock(start_mutex_);
      start_error_ = error;
    }
    started_.notify_all();
    auto waiters = std::exchange(connect_waiters_, {});
    for (auto& waiter : waiters) waiter(error);
    return;
  }
  if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) on_disconnected();
}

void zookeeper_backend::on_connected() {
  connected_ = true;
  {
    // The server may have changed the session timeout to fit its [min, max] range.
    std::lock_guard lock(handle_mutex_);
    if (handle_ && zoo_recv_timeout(handle_) > 0) {
      negotiated_timeout_ = std::chrono::milliseconds(zoo_recv_timeout(handle_));
    }
  }
  disconnected_too_long_ = false;
  disconnect_timer_->cancel();
  {
    std::lock_guard lock(start_mutex_);
    start_connected_ = true;
  }
  started_.notify_all();
  auto waiters = std::exchange(connect_waiters_, {});
  for (auto& waiter : waiters) waiter(nullptr);
  retry_pending_removes();
}

void zookeeper_backend::on_disconnected() {
  if (!connected_) return;
  connected_ = false;
  start_disconnect_clock();
}

void zookeeper_backend::start_disconnect_clock() {
  // The ensemble expires a session it has not heard from for a session timeout t. The client
  // notices a silent connection only after 2t/3 without a reply, so the session may be gone t/3
  // after we learn of the disconnection: from then on holders must stop (we learn for sure
  // only when we reach a server again), and nobody waits any longer for a connection.
  disconnect_timer_->expires_after(negotiated_timeout_ / 3);
  disconnect_timer_->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->connected_) return;
    self->disconnected_too_long_ = true;
    self->mark_all_lost();
    auto error = std::make_exception_ptr(connection_error(
        "dlock: zookeeper " + self->endpoint_ + ": no server of the ensemble reachable"));
    auto waiters = std::exchange(self->connect_waiters_, {});
    for (auto& waiter : waiters) waiter(error);
  });
}

void zookeeper_backend::on_expired() {
  connected_ = false;
  mark_all_lost();
  pending_removes_.clear();  // ephemeral nodes went with the session
  zhandle_t* expired = nullptr;
  {
    std::lock_guard lock(handle_mutex_);
    expired = std::exchange(handle_, nullptr);
  }
  if (expired) zookeeper_close(expired);
  // Acquires wait for the new session no longer than for a reconnection.
  start_disconnect_clock();
  try {
    open_session();
  } catch (...) {
    events().background_error(std::current_exception());
  }
}

void zookeeper_backend::mark_all_lost() {
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(held_mutex_);
    for (auto& [id, held] : held_) lost.push_back(held.lease->lost_signal());
  }
  // Outside the mutex: a stop callback may release its handle at once.
  for (auto& signal : lost) signal.request_stop();
}

void zookeeper_backend::when_connected(std::function<void(std::exception_ptr)> then) {
  if (connected_) return then(nullptr);
  if (disconnected_too_long_) {
    return then(std::make_exception_ptr(connection_error(
        "dlock: zookeeper " + endpoint_ + ": no server of the ensemble reachable")));
  }
  connect_waiters_.push_back(std::move(then));
}

void zookeeper_backend::issue(std::uint64_t route_id,
                              const std::function<int(zhandle_t*, const void*)>& call) {
  int rc = ZINVALIDSTATE;
  {
    std::lock_guard lock(handle_mutex_);
    if (handle_) rc = call(handle_, route_context(route_id));
  }
  if (rc != ZOK) deliver(route_id, {.rc = rc});
}

void zookeeper_backend::create(const std::string& path, bool sequential_ephemeral,
                               zk_handler then, const std::string& data) {
  const auto id = add_route(io().executor(), std::move(then));
  const int flags = sequential_ephemeral ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_CONTAINER;
  issue(id, [&](zhandle_t* handle, const void* context) {
    return zoo_acreate2(handle, path.c_str(), data.data(), static_cast<int>(data.size()), &acl_,
                        flags, on_create_completion, context);
  });
}

void zookeeper_backend::ensure_path(const std::string& path, zk_handler then,
                                    std::string leaf_data) {
  // Creates each missing ancestor and then `path` as container nodes, top down; a node
  // that exists already (made by someone else meanwhile) is fine.
  std::vector<std::string> prefixes;
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    prefixes.push_back(path.substr(0, at));
  }
  prefixes.push_back(path);
  struct chain {
    std::weak_ptr<zookeeper_backend> backend;
    std::vector<std::string> paths;
    std::string leaf_data;
    std::size_t next = 0;
    zk_handler then;
    static void step(std::shared_ptr<chain> c) {
      auto backend = c->backend.lock();
      if (!backend) return;
      if (c->next == c->paths.size()) return c->then({.rc = ZOK});
      const bool leaf = c->next + 1 == c->paths.size();
      const std::string& path = c->paths[c->next++];
      backend->create(path, false, [c](zk_reply reply) {
        if (reply.rc != ZOK && reply.rc != ZNODEEXISTS) return c->then(std::move(reply));
        step(c);
      }, leaf ? c->leaf_data : std::string());
    }
  };
  chain::step(std::make_shared<chain>(
      chain{weak_from_this(), std::move(prefixes), std::move(leaf_data), 0, std::move(then)}));
}

void zookeeper_backend::read(const std::string& path, zk_handler then, zk_handler* on_change,
                             std::uint64_t* watch_id, const read_call& call,
                             bool answer_on_client_thread) {
  const auto id = add_route(answer_on_client_thread ? boost::asio::any_io_executor() : io().executor(),
                            std::move(then));
  void* watch_context = nullptr;
  if (on_change) {
    *watch_id = add_route(io().executor(), std::move(*on_change));
    watch_context = const_cast<void*>(route_context(*watch_id));
  }
  issue(id, [&](zhandle_t* handle, const void* context) {
    return call(handle, path.c_str(), on_change ? on_watch_event : nullptr, watch_context,
                context);
  });
}

void zookeeper_backend::get_children(const std::string& path, zk_handler then,
                                     zk_handler* on_change, std::uint64_t* watch_id) {
  read(path, std::move(then), on_change, watch_id,
       [](zhandle_t* handle, const char* node, watcher_fn watcher, void* watch_context,
          const void* context) {
         return zoo_awget_children(handle, node, watcher, watch_context, on_children_completion,
                                   context);
       });
}

void zookeeper_backend::exists(const std::string& path, zk_handler then, zk_handler* on_change,
                               std::uint64_t* watch_id, bool answer_on_client_thread) {
  read(path, std::move(then), on_change, watch_id,
       [](zhandle_t* handle, const char* node, watcher_fn watcher, void* watch_context,
          const void* context) {
         return zoo_awexists(handle, node, watcher, watch_context, on_stat_completion, context);
       },
       answer_on_client_thread);
}

void zookeeper_backend::get_data(const std::string& path, zk_handler then) {
  const auto id = add_route(io().executor(), std::move(then));
  issue(id, [&](zhandle_t* handle, const void* context) {
    return zoo_aget(handle, path.c_str(), 0, on_data_completion, context);
  });
}

void zookeeper_backend::remove(const std::string& path, zk_handler then) {
  const auto id = add_route(
      io().executor(), [weak = weak_from_this(), path, then = std::move(then)](zk_reply reply) {
        if (is_connection_loss(reply.rc)) {
          if (auto self = weak.lock()) self->pending_removes_.push_back(path);
        }
        then(std::move(reply));
      });
  issue(id, [&](zhandle_t* handle, const void* context) {
    return zoo_adelete(handle, path.c_str(), -1, on_void_completion, context);
  });
}

void zookeeper_backend::retry_pending_removes() {
  for (const std::string& path : std::exchange(pending_removes_, {})) {
    remove(path, [](zk_reply) {});
  }
}

void zookeeper_backend::remove_released(const std::string& path, std::string_view name) {
  if (running_in_this_thread()) {
    // The io thread cannot wait for its own answer; the delete is retried if it is cut off.
    return remove(path, [](zk_reply) {});
  }
  auto answer = std::make_shared<std::promise<int>>();
  auto result = answer->get_future();
  // Runs on the client's completion thread: it only fulfils the promise (and hands a cut-off
  // delete to the io thread to retry).
  const auto id = add_route({}, [answer, weak = weak_from_this(), path](zk_reply reply) {
    if (is_connection_loss(reply.rc)) {
      if (auto self = weak.lock()) {
        boost::asio::post(self->executor(), [weak, path] {
          if (auto backend = weak.lock()) backend->pending_removes_.push_back(path);
        });
      }
    }
    answer->set_value(reply.rc);
  });
  issue(id, [&](zhandle_t* handle, const void* context) {
    return zoo_adelete(handle, path.c_str(), -1, on_void_completion, context);
  });
  if (result.wait_for(options_.session_timeout) != std::future_status::ready) {
    throw connection_error(message("no answer to the release within the session timeout (the " +
                                   std::string("node goes with the session)"),
                                   name));
  }
  const int rc = result.get();
  if (rc == ZOK || rc == ZNONODE || is_session_gone(rc)) return;
  throw connection_error(message(std::string("release failed: ") + zerror(rc) +
                                     (is_connection_loss(rc) ? " (retried after reconnecting)" : ""),
                                 name));
}

std::exception_ptr zookeeper_backend::recorded_count_mismatch(const acquire_request& request,
                                                         const std::string& recorded,
                                                         const std::string& leases_path) const {
  // Only a plain number is dlock's record; Curator leaves the node empty (or writes other data).
  if (recorded.empty() || recorded.size() > 10 ||
      !std::all_of(recorded.begin(), recorded.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return nullptr;
  }
  if (recorded == std::to_string(request.max_count)) return nullptr;
  return std::make_exception_ptr(
      max_count_mismatch(request, std::stoull(recorded), leases_path));
}

std::optional<std::uint32_t> zookeeper_backend::current_count(const acquire_request& request) {
  if (running_in_this_thread()) return std::nullopt;  // cannot wait for its own answers
  const std::string leases = node_of(request.name) + "/leases";
  struct answers {
    std::promise<zk_reply> data, children;
  };
  auto pending = std::make_shared<answers>();
  auto data = pending->data.get_future();
  auto children = pending->children.get_future();
  // Both answers only fulfil promises on the client's completion thread.
  issue(add_route({}, [pending](zk_reply reply) { pending->data.set_value(std::move(reply)); }),
        [&](zhandle_t* handle, const void* context) {
          return zoo_aget(handle, leases.c_str(), 0, on_data_completion, context);
        });
  issue(add_route({}, [pending](zk_reply reply) { pending->children.set_value(std::move(reply)); }),
        [&](zhandle_t* handle, const void* context) {
          return zoo_aget_children(handle, leases.c_str(), 0, on_children_completion, context);
        });
  if (children.wait_for(options_.session_timeout) != std::future_status::ready) {
    throw connection_error(message("no answer when counting leases", request.name));
  }
  const zk_reply listed = children.get();
  const zk_reply recorded = data.get();
  if (listed.rc == ZNONODE) return request.max_count;
  if (listed.rc != ZOK) {
    throw connection_error(message(std::string("counting leases failed: ") + zerror(listed.rc),
                                   request.name));
  }
  if (auto mismatch = recorded_count_mismatch(request, recorded.data, leases)) {
    std::rethrow_exception(mismatch);
  }
  const auto held = static_cast<std::size_t>(
      std::count_if(listed.children.begin(), listed.children.end(),
                    [](const std::string& child) { return is_lease_node(child); }));
  return held >= request.max_count ? 0 : request.max_count - static_cast<std::uint32_t>(held);
}

std::uint64_t zookeeper_backend::add_held(zookeeper_lease* lease) {
  std::lock_guard lock(held_mutex_);
  const std::uint64_t id = ++next_held_id_;
  held_.emplace(id, held_lease{lease, 0});
  return id;
}

void zookeeper_backend::remove_held(std::uint64_t id) {
  std::uint64_t watch_route = 0;
  {
    std::lock_guard lock(held_mutex_);
    auto it = held_.find(id);
    if (it == held_.end()) return;
    watch_route = it->second.watch_route;
    held_.erase(it);
  }
  // The release's own delete fires the watch; nobody needs to hear of it.
  drop_route(watch_route);
}

void zookeeper_backend::watch_held(std::uint64_t held_id, const std::string& node) {
  zk_handler on_change = [weak = weak_from_this(), held_id, node](zk_reply event) {
    if (auto self = weak.lock()) self->on_held_node_event(held_id, node, event.event);
  };
  std::uint64_t watch_id = 0;
  // The answer is looked at on the client's completion thread, which only posts in the rare
  // case that matters: one wake-up of the provider's thread less per grant.
  exists(node,
         [weak = weak_from_this(), executor = io().executor(), held_id, node](zk_reply reply) {
           if (reply.rc == ZCONNECTIONLOSS || reply.rc == ZOPERATIONTIMEOUT) {
             // The watch was not set: set it again once connected, or a later deletion of our
             // node would never be reported as lost.
             boost::asio::post(executor, [weak, held_id, node] {
               if (auto self = weak.lock()) self->watch_held_when_connected(held_id, node);
             });
             return;
           }
           // Deleted between the grant and this watch (broken at once, or the session ended).
           if (reply.rc != ZNONODE && !is_session_gone(reply.rc)) return;
           boost::asio::post(executor, [weak, held_id, node] {
             if (auto self = weak.lock()) self->on_held_node_event(held_id, node, ZOO_DELETED_EVENT);
           });
         },
         &on_change, &watch_id, true);
  std::lock_guard lock(held_mutex_);
  if (auto it = held_.find(held_id); it != held_.end()) it->second.watch_route = watch_id;
}

void zookeeper_backend::watch_held_when_connected(std::uint64_t held_id,
                                                  const std::string& node) {
  {
    std::lock_guard lock(held_mutex_);
    auto it = held_.find(held_id);
    if (it == held_.end()) return;  // released meanwhile
    drop_route(it->second.watch_route);  // that watch never reached the server
    it->second.watch_route = 0;
  }
  // Disconnected for too long instead: every held lease is marked lost by the session clock.
  when_connected([weak = weak_from_this(), held_id, node](std::exception_ptr error) {
    if (error) return;
    if (auto self = weak.lock()) self->watch_held(held_id, node);
  });
}

void zookeeper_backend::on_held_node_event(std::uint64_t held_id, const std::string& node,
                                           int event) {
  std::optional<std::stop_source> lost;
  {
    std::lock_guard lock(held_mutex_);
    auto it = held_.find(held_id);
    if (it == held_.end()) return;  // released meanwhile
    if (event == ZOO_DELETED_EVENT || event == ZOO_SESSION_EVENT) {
      lost = it->second.lease->lost_signal();
    }
  }
  if (lost) {
    lost->request_stop();
    return;
  }
  watch_held(held_id, node);  // its data changed: the watch is used up, set it again
}

std::shared_ptr<acquire_operation> zookeeper_backend::start_acquire(acquire_request request,
                                                                    acquire_completion done) {
  auto op = std::make_shared<zookeeper_acquire>(shared_from_this(), std::move(request),
                                                std::move(done));
  op->start();
  return op;
}

}  // namespace dlock::zookeeper::detail
