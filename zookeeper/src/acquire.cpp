#include "acquire.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include <boost/asio/post.hpp>

#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "lease.hpp"
#include "min_hold.hpp"
#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

zookeeper_acquire::zookeeper_acquire(std::shared_ptr<zookeeper_backend> backend,
                                     acquire_request request, acquire_completion done)
    : queue_recipe_operation(backend->executor()),
      backend_(std::move(backend)),
      request_(std::move(request)),
      done_(std::move(done)) {
  const std::string node = backend_->node_of(request_.name);
  if (request_.kind == resource_kind::semaphore) {
    stages_.push_back({node + "/locks", lock_marker});
    stages_.push_back({node + "/leases", lease_marker});
  } else if (request_.kind == resource_kind::reader_writer_lock) {
    stages_.push_back({node, request_.mode == lock_mode::shared ? read_marker : write_marker});
  } else if (request_.kind == resource_kind::upgrade_gate) {
    stages_.push_back({node + "/" + std::string(upgrade_gate_node), lock_marker});
  } else if (request_.kind == resource_kind::election) {
    // Curator's LeaderLatch on the name's node: its `latch-` candidates and the lock's
    // `lock-` nodes leave each other out of their queues.
    stages_.push_back({node, latch_marker});
  } else {
    stages_.push_back({node, lock_marker});
  }
}

zk_session& zookeeper_acquire::session() { return backend_->session(); }

std::string zookeeper_acquire::node_data() const {
  // A candidate's data is the value it proclaims once it leads (election_board.cpp); empty
  // until then, it shows nobody leading in the meantime.
  return request_.kind == resource_kind::election ? std::string() : request_.owner;
}

zk_handler zookeeper_acquire::wake() {
  return [self = shared_from_this()](zk_reply event) {
    if (self->recipe_.done()) return;
    self->on_watch_event(event);
  };
}

void zookeeper_acquire::queue_key() {
  if (unreachable_id_ == 0) {
    unreachable_id_ = session().when_unreachable([self = shared_from_this()](
                                                     std::exception_ptr error) {
      self->on_unreachable(std::move(error));
    });
  }
  drop_watch();
  drop_own_watch();
  drop_hold_node();
  for (stage& s : stages_) {
    // A node left from the attempt before (the semaphore's lock) must not block others.
    if (!s.node.empty()) session().remove(s.node, [](zk_reply) {});
    forget_unknown_create(s);
    s = stage{s.parent, s.marker};
  }
  stage_index_ = 0;
  create_own();
}

void zookeeper_acquire::create_own() {
  // Marked, so that a waiter behind us knows to look for our hold when we go (min_hold.hpp).
  current().prefix =
      new_protection_prefix() + std::string(takes_hold() ? hold_taker_mark : std::string_view());
  send_create();
}

void zookeeper_acquire::send_create() {
  when_connected([](zookeeper_acquire& self) {
    stage& s = self.current();
    s.create_unknown = true;
    const std::string path = s.parent + "/" + s.prefix + std::string(s.marker);
    auto answer =
        self.step([](zookeeper_acquire& me, zk_reply reply) { me.on_created(std::move(reply)); });
    // Noted even when the answer no longer counts: a withdrawal deletes the node it made.
    auto created = [op = self.shared_from_this(), answer = std::move(answer)](
                       zk_reply reply) mutable {
      if (!op->recipe_.done()) op->note_created(reply);
      answer(std::move(reply));
    };
    if (self.leases_stage()) return self.session().create(path, true, created, self.node_data());
    // Pipelined: the server runs a session's requests in order, so this listing already
    // shows the node the create makes, and the grant costs one round trip less. The two
    // answers come together and wake the io thread once (on_created() only waits for the
    // listing when the create succeeded).
    const auto attempt = ++self.attempt_;
    self.pipelined_listing_ = attempt;
    auto [create_answer, listing_answer] = joined_answers(
        self.executor_, std::move(created),
        self.step([attempt](zookeeper_acquire& me, zk_reply reply) {
          me.on_pipelined_listing(attempt, std::move(reply));
        }));
    self.session().create(path, true, std::move(create_answer), self.node_data(), true);
    self.session().get_children(s.parent, std::move(listing_answer), nullptr, nullptr, true);
  });
}

void zookeeper_acquire::note_created(const zk_reply& reply) {
  stage& s = current();
  // A create cut off by the connection may still have happened: find_own() settles it.
  s.create_unknown = is_connection_loss(reply.rc);
  if (reply.rc != ZOK) return;
  s.node = reply.path;
  s.czxid = reply.czxid;
}

void zookeeper_acquire::on_created(zk_reply reply) {
  const stage& s = current();
  if (reply.rc == ZOK) {
    if (pipelined_listing_ == attempt_ && pipelined_listing_ != 0) return;  // it follows
    return after_create();
  }
  if (reply.rc == ZNONODE) {
    // dlock records a semaphore's max_count as the data of its leases node.
    return session().ensure_path(s.parent, step([](zookeeper_acquire& self, zk_reply made) {
                                   if (made.rc == ZNONODE) return self.fail_missing_chroot();
                                   if (made.rc != ZOK)
                                     return self.on_call_failed(made.rc, "create");
                                   self.send_create();
                                 }),
                                 leases_stage() ? std::to_string(request_.max_count) : "");
  }
  // The create may have happened: look for our prefix before creating again (a second
  // node of ours would block everyone behind it until the session ends).
  if (is_connection_loss(reply.rc)) return find_own();
  on_call_failed(reply.rc, "create");
}

void zookeeper_acquire::find_own() {
  when_connected([](zookeeper_acquire& self) {
    self.session().get_children(
        self.current().parent, self.step([](zookeeper_acquire& me, zk_reply reply) {
          if (is_connection_loss(reply.rc)) return me.find_own();
          stage& s = me.current();
          if (reply.rc == ZNONODE) return s.create_unknown = false, me.send_create();
          if (reply.rc != ZOK) return me.on_call_failed(reply.rc, "find");
          // Settled: the create happened (adopt the node) or never will.
          s.create_unknown = false;
          auto ours = std::find_if(reply.children.begin(), reply.children.end(),
                                   [&](const std::string& c) { return c.starts_with(s.prefix); });
          if (ours == reply.children.end()) return me.send_create();
          s.node = s.parent + "/" + *ours;
          me.session().exists(s.node, me.step([](zookeeper_acquire& op, zk_reply found) {
            if (found.rc != ZOK) return op.on_call_failed(found.rc, "find");
            op.current().czxid = found.czxid;
            op.after_create();
          }));
        }));
  });
}

void zookeeper_acquire::on_pipelined_listing(std::uint64_t attempt, zk_reply reply) {
  if (attempt != attempt_) return;
  pipelined_listing_ = 0;
  // The create failed (its own answer deals with that) or is still out (refused listing:
  // the create's answer lists again).
  if (current().node.empty()) return;
  on_queue(std::move(reply));
}

void zookeeper_acquire::after_create() {
  if (leases_stage()) return check_leases();
  check_queue();
}

void zookeeper_acquire::list_queue() {
  if (leases_stage()) return check_leases();
  check_queue();
}

void zookeeper_acquire::check_queue() {
  session().get_children(current().parent, step([](zookeeper_acquire& self, zk_reply reply) {
                           self.on_queue(std::move(reply));
                         }));
}

void zookeeper_acquire::on_queue(zk_reply reply) {
  if (reply.rc != ZOK) return on_call_failed(reply.rc, "list");
  const stage& s = current();
  const std::string own = basename_of(s.node);
  const auto queue = s.marker == latch_marker ? ordered_by(reply.children, latch_marker)
                                              : queue_order(reply.children);
  auto ours =
      std::find_if(queue.begin(), queue.end(), [&](const queued_node& n) { return n.name == own; });
  // Our node is gone (deleted by someone, or its session expired): queue again.
  if (ours == queue.end()) return recipe_.feed(event::own_key_gone);
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
  // Another grant's hold keeps the name until the server or its holder deletes its node.
  const auto hold = respects_holds()
                        ? other_hold_node(reply.children, hold_node_name(s.czxid))
                        : std::nullopt;
  if (!predecessor && !hold) return at_head_of_queue();
  predecessor_ = s.parent + "/" + (predecessor ? *predecessor : *hold);
  // Nodes are only ever added behind ours, so once the one blocker we watch is deleted,
  // nothing is in our way any longer: the grant needs no second listing (a round trip less
  // per handoff). Unless a hold may be left: a listing shows it.
  last_blocker_ = predecessor && blockers == 1 && !hold && !takes_min_hold(*predecessor);
  recipe_.feed(event::someone_in_front);
}

void zookeeper_acquire::at_head_of_queue() {
  if (request_.kind == resource_kind::semaphore && stage_index_ == 0) {
    stage_index_ = 1;
    return create_own();
  }
  if (takes_hold()) return record_hold();
  recipe_.feed(event::first_in_queue);
}

bool zookeeper_acquire::respects_holds() const {
  return request_.kind == resource_kind::lock || request_.kind == resource_kind::reader_writer_lock;
}

void zookeeper_acquire::record_hold() {
  const stage& s = current();
  hold_node_ = s.parent + "/" + hold_node_name(s.czxid);
  session().create_ttl(hold_node_, std::to_string(ttl_of(request_.min_hold).count()),
                       ttl_of(request_.min_hold),
                       step([](zookeeper_acquire& self, zk_reply reply) {
                         self.on_hold_recorded(reply);
                       }));
}

void zookeeper_acquire::on_hold_recorded(const zk_reply& reply) {
  // Existing, it is ours: made by a create whose answer was lost with the connection.
  if (reply.rc == ZOK || reply.rc == ZNODEEXISTS) {
    hold_until_ = std::chrono::steady_clock::now() + request_.min_hold;
    return recipe_.feed(event::first_in_queue);
  }
  if (reply.rc == ZUNIMPLEMENTED) {
    return fail(std::make_exception_ptr(connection_error(backend_->message(
        "the server no longer takes TTL nodes, which min_hold needs (start every server with "
        "-Dzookeeper.extendedTypesEnabled=true)",
        request_.name))));
  }
  on_call_failed(reply.rc, "create the minimum hold's node");
}

void zookeeper_acquire::drop_hold_node() {
  if (!hold_node_.empty()) session().remove(std::exchange(hold_node_, {}), [](zk_reply) {});
}

void zookeeper_acquire::watch_predecessor() {
  note_waiting();
  // A semaphore's leases are watched by the listing itself (check_leases).
  if (leases_stage()) return;
  watched_last_blocker_ = last_blocker_;
  watch(predecessor_);
  watch_own_node();
}

void zookeeper_acquire::watch(const std::string& path) {
  zk_handler on_change = wake();
  const std::uint64_t serial = ++watch_serial_;
  // The answer is looked at inside the client's processing: the predecessor is there (nearly
  // always) and the watch wakes us, so the recipe runs again only for an answer that needs
  // it. It is no call out (step()): it creates nothing that
  // a withdrawal must wait for, and one session's answer comes before its watch's event.
  session().exists(
      path,
      [weak = weak_from_this(), executor = executor_, serial](zk_reply reply) {
        if (reply.rc == ZOK) return;
        boost::asio::post(executor, [weak, serial, reply = std::move(reply)] {
          auto self = weak.lock();
          // Moved on meanwhile (withdrawn, finished, queued again): not this watch's business.
          if (!self || self->watch_serial_ != serial || !self->recipe_.queueing()) return;
          self->drop_watch();
          // Gone already: look again now.
          if (reply.rc == ZNONODE) return self->check_queue();
          self->on_call_failed(reply.rc, "watch");
        });
      },
      &on_change, &watch_id_, true);
}

void zookeeper_acquire::on_watch_event(const zk_reply& event) {
  watch_id_ = 0;
  // A call still out answers first and looks again anyway; a withdrawal deletes our nodes.
  if (recipe_.calls_out() > 0 || !recipe_.queueing()) return;
  if (event.event == ZOO_SESSION_EVENT) return recipe_.feed(event::own_key_gone);  // expired
  if (!leases_stage() && event.event == ZOO_DELETED_EVENT &&
      std::exchange(watched_last_blocker_, false)) {
    return at_head_of_queue();
  }
  recipe_.feed(event::predecessor_gone);
}

void zookeeper_acquire::drop_watch() {
  ++watch_serial_;
  if (watch_id_) drop_route(watch_id_);
  watch_id_ = 0;
}

void zookeeper_acquire::watch_own_node() {
  // Semaphores are granted a node of their second stage, which they do not wait on this way;
  // an election's node gets the leader's record written to it.
  if (own_watch_ || stages_.size() != 1 || request_.kind == resource_kind::election) return;
  own_watch_ = backend_->held().watch_early(current().node, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || !self->recipe_.queueing()) return;
    self->drop_own_watch();
    // Our node is gone: a call out looks at the queue anyway, else look now (and queue again).
    if (self->recipe_.calls_out() == 0) self->check_queue();
  });
}

void zookeeper_acquire::drop_own_watch() {
  if (own_watch_) held_watch::drop(*std::exchange(own_watch_, nullptr));
}

void zookeeper_acquire::note_waiting() {
  if (told_waiting_) return;
  told_waiting_ = true;
  backend_->events().acquire_waiting();
}

void zookeeper_acquire::on_call_failed(int rc, std::string_view call) {
  if (is_connection_loss(rc)) {
    // Our node (if any) lives on with the session: carry on once reconnected.
    return when_connected([](zookeeper_acquire& self) {
      if (self.current().node.empty()) return self.send_create();
      self.after_create();
    });
  }
  // A new session takes over, or our parent went: queue again.
  if (is_session_gone(rc) || rc == ZNONODE) return recipe_.feed(event::own_key_gone);
  std::string what;
  if (rc == ZNOAUTH) {
    what = "not authorized to " + std::string(call) + " under " + current().parent +
           " (check the user, password and the node's ACL)";
  } else {
    what = std::string(call) + " under " + current().parent + " failed: " + zerror(rc);
  }
  fail(std::make_exception_ptr(connection_error(backend_->message(what, request_.name))));
}

void zookeeper_acquire::on_unreachable(std::exception_ptr error) {
  unreachable_id_ = 0;
  // Withdrawn or done: it ends on its own. Else the caller hears now, and a call still out
  // (one may be creating our node) is answered, a connection loss at the latest, before our
  // nodes go.
  if (!recipe_.queueing()) return;
  error_ = std::move(error);
  recipe_.feed(event::connection_lost);
}

void zookeeper_acquire::forget_unknown_create(stage& s) {
  if (!std::exchange(s.create_unknown, false) || !s.node.empty()) return;
  session().remove_orphans(s.parent, s.prefix);
}

void zookeeper_acquire::fail_missing_chroot() {
  fail(std::make_exception_ptr(connection_error(backend_->message(
      "the chroot node " + backend_->settings().chroot + " does not exist (create it first)",
      request_.name))));
}

void zookeeper_acquire::fail(std::exception_ptr error) {
  error_ = std::move(error);
  recipe_.feed(event::failed);
}

void zookeeper_acquire::delete_own_key() {
  drop_watch();
  drop_own_watch();
  drop_hold_node();
  auto pending = std::make_shared<int>(0);
  for (stage& s : stages_) {
    if (s.node.empty()) continue;
    ++*pending;
    session().remove(std::exchange(s.node, {}), [self = shared_from_this(), pending](zk_reply) {
      if (--*pending == 0) self->recipe_.feed(event::key_deleted);
    });
  }
  if (*pending == 0) recipe_.feed(event::key_deleted);
}

void zookeeper_acquire::abandon_own_key() {
  drop_watch();
  drop_own_watch();
  drop_hold_node();
  for (stage& s : stages_) {
    if (!s.node.empty()) session().remove(std::exchange(s.node, {}), [](zk_reply) {});
  }
  if (recipe_.done()) end();
}

void zookeeper_acquire::report(queue_recipe::outcome how) {
  drop_watch();
  std::unique_ptr<lease> granted;
  if (how == queue_recipe::outcome::granted) {
    stage& s = current();
    std::optional<min_hold_grant> hold;
    if (!hold_node_.empty()) hold = min_hold_grant{std::exchange(hold_node_, {}), hold_until_};
    granted = std::make_unique<zookeeper_lease>(backend_, std::exchange(s.node, {}),
                                                request_.name, s.czxid,
                                                std::exchange(own_watch_, nullptr),
                                                std::move(hold));
  }
  // Abandoning (a call still out) takes no more wake-ups.
  drop_own_watch();
  if (recipe_.done()) end();
  auto done = std::move(done_);
  done(how == queue_recipe::outcome::failed ? error_ : nullptr, std::move(granted));
}

void zookeeper_acquire::end() {
  if (std::exchange(ended_, true)) return;
  if (unreachable_id_) session().forget_unreachable(std::exchange(unreachable_id_, 0));
  drop_watch();
  drop_own_watch();
  for (stage& s : stages_) forget_unknown_create(s);
  backend_.reset();
}

}  // namespace dlock::zookeeper::detail
