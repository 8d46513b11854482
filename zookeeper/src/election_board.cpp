// The ZooKeeper backend's election board, in Apache Curator's LeaderLatch layout (so Java
// services with a LeaderLatch on the same path take part in the same election): each
// candidate is an EPHEMERAL_SEQUENTIAL node `_c_<uuid>-latch-<sequence>` under the election's
// node, the lowest leads, and its data is the leader's value (a LeaderLatch's participant id).
// The record is the leader's own node: proclaim writes its data, so the record cannot outlive
// the lead nor be written by anyone else's term, and it goes with the node when the lead ends.
// Observers are told through watches (election_watch.hpp).
#include <algorithm>
#include <mutex>
#include <vector>

#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "election_watch.hpp"
#include "lease.hpp"
#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

namespace {

// A dlock candidate's node is created empty and shows a record once proclaimed (its version
// rises); a LeaderLatch participant's node carries its id from the start.
std::optional<leader_info> record_of(const zk_reply& node) {
  if (node.version == 0 && node.data.empty()) return std::nullopt;
  return leader_info{node.data, static_cast<std::uint64_t>(node.czxid)};
}

class zookeeper_election_board final : public election_board {
 public:
  explicit zookeeper_election_board(std::shared_ptr<zookeeper_backend> backend)
      : backend_(std::move(backend)) {}

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    const auto& held = dynamic_cast<const zookeeper_lease&>(leadership);
    const std::string data(value);
    // The version we wrote last: a write by anyone else in between is not overwritten.
    const std::int32_t version = held.data_version();
    std::vector<zk_reply> written;
    try {
      written = backend_->ask(
          [&](const auto& answer) {
            backend_->session().set_data(held.node(), data, version, answer(), true);
          },
          said("no answer to proclaim within release_timeout", election));
    } catch (const connection_error&) {
      held.set_data_version(-1);  // it may have been written
      throw;
    }
    const int rc = written.front().rc;
    if (rc == ZOK) return held.set_data_version(written.front().version);
    if (rc == ZNONODE || is_session_gone(rc)) {
      throw lock_lost_error(said("the lead of term " + std::to_string(leadership.fencing_token()) +
                                     " is over (its node " + held.node() +
                                     " is gone); proclaim refused",
                                 election));
    }
    if (rc == ZBADVERSION) {
      throw dlock::error(said("the leader's node " + held.node() +
                                  " was written by another client; proclaim refused",
                              election));
    }
    if (is_connection_loss(rc)) held.set_data_version(-1);
    throw failure("proclaim", rc, election);
  }

  // The record is the leader's node, which the release deletes right after this.
  void withdraw(std::string_view, const lease&) override {}

  std::optional<leader_info> leader(std::string_view election) override {
    const std::string parent = backend_->node_of(election);
    for (;;) {
      // A sync first, so that this session's member has every write of other sessions that
      // completed before the call (a leader elected through another member, say).
      const auto listed = backend_->ask(
          [&](const auto& answer) {
            backend_->session().sync(parent, answer(), true);
            backend_->session().get_children(parent, answer(), nullptr, nullptr, true);
          },
          said("no answer when reading the leader within release_timeout", election));
      const zk_reply& children = listed.back();
      if (children.rc == ZNONODE) return std::nullopt;
      if (children.rc != ZOK) throw failure("reading the leader", children.rc, election);
      rearm_broken_watches(parent);
      const auto candidates = ordered_by(children.children, latch_marker);
      if (candidates.empty()) return std::nullopt;
      const std::string node = parent + "/" + candidates.front().name;
      const zk_reply read =
          backend_
              ->ask([&](const auto& answer) { backend_->session().get_data(node, answer(), true); },
                    said("no answer when reading the leader within release_timeout", election))
              .front();
      if (read.rc == ZNONODE) continue;  // it left between the two reads: look again
      if (read.rc != ZOK) throw failure("reading the leader", read.rc, election);
      return record_of(read);
    }
  }

  std::shared_ptr<void> watch(std::string_view election, std::function<void()> changed) override {
    auto watch =
        std::make_shared<election_watch>(backend_, backend_->node_of(election), std::move(changed));
    {
      std::lock_guard lock(watches_mutex_);
      std::erase_if(watches_, [](const auto& w) { return w.expired(); });
      watches_.push_back(watch);
    }
    watch->start();
    return std::shared_ptr<void>(watch.get(), [watch](election_watch*) { watch->close(); });
  }

 private:
  std::string said(const std::string& what, std::string_view election) const {
    return backend_->message(what + " for election '" + naming::quote_for_message(election) +
                             "'");
  }

  connection_error failure(const std::string& call, int rc, std::string_view election) const {
    if (rc == ZNOAUTH) {
      return connection_error(
          said(call + ": not authorized (check the user, password and the node's ACL)", election));
    }
    return connection_error(said(call + " failed: " + zerror(rc), election));
  }

  // A watch that could not be set (the session was out of touch) is set again once a read
  // shows the server answers: core reads every poll period, so no outage ends pushing for good.
  void rearm_broken_watches(const std::string& parent) {
    std::vector<std::shared_ptr<election_watch>> broken;
    {
      std::lock_guard lock(watches_mutex_);
      for (const auto& weak : watches_) {
        auto watch = weak.lock();
        if (watch && watch->parent() == parent && watch->broken()) broken.push_back(watch);
      }
    }
    for (const auto& watch : broken) watch->start();
  }

  std::shared_ptr<zookeeper_backend> backend_;
  std::mutex watches_mutex_;
  std::vector<std::weak_ptr<election_watch>> watches_;
};

}  // namespace

std::shared_ptr<election_board> zookeeper_backend::elections() {
  return std::make_shared<zookeeper_election_board>(shared_from_this());
}

}  // namespace dlock::zookeeper::detail
