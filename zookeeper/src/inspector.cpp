// What ZooKeeper shows an inspector, and an administrator's break (docs/zookeeper.md, "What
// inspect can see"). Every contender is a node, holders and waiters alike: its data is the
// owner (Curator writes the host's address there instead), its czxid the fencing token, its
// ctime the start. Who holds is decided by the acquire's own rules (node_layout.hpp).
#include <algorithm>
#include <charconv>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "min_hold.hpp"
#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

namespace {

struct contender {
  std::string path;
  party_kind kind;
  bool holds;
};

struct name_nodes {
  std::vector<contender> contenders;
  std::optional<std::uint32_t> max_count;  // as recorded on the leases node
  std::vector<std::string> holds;          // the minimum holds' nodes (min_hold.hpp)
};

// A lock or reader-writer lock's queue: an exclusive node (lock, writer) holds when it is
// first, a reader when no exclusive node is before it.
void add_queue(const std::string& parent, const std::vector<std::string>& children,
               std::vector<contender>& into) {
  bool anyone_before = false;
  bool exclusive_before = false;
  for (const queued_node& node : queue_order(children)) {
    party_kind kind = party_kind::read;
    if (node.excludes_readers) {
      kind = node.name.rfind(write_marker) == std::string::npos ? party_kind::exclusive
                                                                : party_kind::write;
    }
    const bool holds = node.excludes_readers ? !anyone_before : !exclusive_before;
    into.push_back({parent + "/" + node.name, kind, holds});
    anyone_before = true;
    exclusive_before = exclusive_before || node.excludes_readers;
  }
}

std::optional<std::uint32_t> recorded_count(const zk_reply& leases) {
  const std::string& text = leases.data;
  std::uint32_t count = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (leases.rc != ZOK || ec != std::errc{} || end != text.data() + text.size() || count == 0) {
    return std::nullopt;
  }
  return count;
}

// A semaphore: the first max_count leases hold (every lease, when the count is not recorded);
// a later lease waits, and so do the contenders queued for the semaphore's `locks` behind
// the one that has it (InterProcessSemaphoreV2).
void add_semaphore(const std::string& node, const zk_reply& leases, const zk_reply& count,
                   const zk_reply& locks, name_nodes& into) {
  into.max_count = recorded_count(count);
  std::size_t index = 0;
  for (const queued_node& lease : ordered_by(leases.children, lease_marker)) {
    const bool holds = !into.max_count || index++ < *into.max_count;
    into.contenders.push_back({node + "/leases/" + lease.name, party_kind::semaphore_slot, holds});
  }
  const auto queued = queue_order(locks.children);
  for (std::size_t i = 1; i < queued.size(); ++i) {
    into.contenders.push_back(
        {node + "/locks/" + queued[i].name, party_kind::semaphore_slot, false});
  }
}

lock_party party_of(const contender& c, const zk_reply& node) {
  return lock_party{
      .kind = c.kind,
      .fencing_token = static_cast<std::uint64_t>(node.czxid),
      .since = std::chrono::system_clock::time_point(std::chrono::milliseconds(node.ctime)),
      .owner = node.data};
}

// Every contender of `name` (with the upgrade gate's holder when `with_gate`), from one
// pipelined round of listings after a sync.
name_nodes contenders_of(zookeeper_backend& backend, const std::string& name, bool with_gate) {
  const std::string node = backend.node_of(name);
  const auto listed = backend.ask(
      [&](const auto& answer) {
        auto& session = backend.session();
        session.sync(node, answer(), true);
        session.get_children(node, answer(), nullptr, nullptr, true);
        session.get_children(node + "/leases", answer(), nullptr, nullptr, true);
        session.get_data(node + "/leases", answer(), true);
        session.get_children(node + "/locks", answer(), nullptr, nullptr, true);
        session.get_children(node + "/" + std::string(upgrade_gate_node), answer(), nullptr,
                             nullptr, true);
      },
      backend.message("no answer when listing the nodes within release_timeout", name));
  for (std::size_t i = 1; i < listed.size(); ++i) {
    const int rc = listed[i].rc;
    if (rc == ZOK || rc == ZNONODE) continue;
    throw connection_error(backend.message(
        rc == ZNOAUTH ? "not authorized to list " + node + " (check the user, password and the "
                        "node's ACL)"
                      : "listing " + node + " failed: " + zerror(rc),
        name));
  }
  name_nodes found;
  add_queue(node, listed[1].children, found.contenders);
  for (const std::string& child : listed[1].children) {
    if (is_hold_node(child)) found.holds.push_back(node + "/" + child);
  }
  add_semaphore(node, listed[2], listed[3], listed[4], found);
  if (with_gate) {
    const auto gate = queue_order(listed[5].children);
    if (!gate.empty()) {
      found.contenders.push_back({node + "/" + std::string(upgrade_gate_node) + "/" +
                                      gate.front().name,
                                  party_kind::exclusive, true});
    }
  }
  return found;
}

}  // namespace

lock_inspection zookeeper_backend::inspect(const std::string& name) {
  lock_inspection found{.name = name};
  const name_nodes nodes = contenders_of(*this, name, false);
  const auto read = ask(
      [&](const auto& answer) {
        for (const contender& c : nodes.contenders) session().get_data(c.path, answer(), true);
        for (const std::string& hold : nodes.holds) session().get_data(hold, answer(), true);
      },
      message("no answer when reading the nodes within release_timeout", name));
  for (std::size_t i = 0; i < nodes.contenders.size(); ++i) {
    if (read[i].rc == ZNONODE) continue;  // gone since the listing
    if (read[i].rc != ZOK) {
      throw connection_error(message("reading " + nodes.contenders[i].path + " failed: " +
                                         zerror(read[i].rc),
                                     name));
    }
    const contender& c = nodes.contenders[i];
    (c.holds ? found.holders : found.waiters).push_back(party_of(c, read[i]));
    if (c.kind == party_kind::semaphore_slot) found.max_count = nodes.max_count;
  }
  // A grant released within its minimum hold still holds the name, without an owner record.
  for (std::size_t i = 0; i < nodes.holds.size(); ++i) {
    const zk_reply& hold = read[nodes.contenders.size() + i];
    const auto token = token_of_hold_node(basename_of(nodes.holds[i]));
    const bool shown = std::any_of(found.holders.begin(), found.holders.end(),
                                   [&](const lock_party& p) { return p.fencing_token == token; });
    if (hold.rc != ZOK || shown) continue;
    found.holders.push_back(lock_party{
        .kind = party_kind::exclusive,
        .fencing_token = *token,
        .since = std::chrono::system_clock::time_point(std::chrono::milliseconds(hold.ctime))});
  }
  std::stable_sort(found.holders.begin(), found.holders.end(),
                   [](const auto& a, const auto& b) { return a.since < b.since; });
  return found;
}

std::vector<lock_inspection> zookeeper_backend::list_locks(const std::string& prefix) {
  const std::string& base = options_.base_path;
  const auto listed = ask(
      [&](const auto& answer) {
        session().sync(base, answer(), true);
        session().get_children(base, answer(), nullptr, nullptr, true);
      },
      message("no answer when listing " + base + " within release_timeout"));
  const zk_reply& children = listed.back();
  if (children.rc == ZNONODE) return {};
  if (children.rc != ZOK) {
    throw connection_error(message("listing " + base + " failed: " + zerror(children.rc)));
  }
  std::vector<lock_inspection> found;
  for (const std::string& child : children.children) {
    const std::string name = naming::unescape_segment(child);
    if (!name.starts_with(prefix)) continue;
    lock_inspection one = inspect(name);
    if (one.held() || !one.waiters.empty()) found.push_back(std::move(one));
  }
  return found;
}

// The holders' nodes go, and the minimum holds' nodes with them; each holder's watch on its
// node marks its handle lost, and the next grant's node is younger, so its czxid (the token) is
// higher. Waiters' nodes stay: they move up the queue. Elections (`latch-` nodes) are not a
// lock's and are left alone.
void zookeeper_backend::break_lock(const std::string& name) {
  // The deletes answer on the io thread, which cannot wait for itself.
  if (running_in_this_thread()) {
    throw std::logic_error("dlock: zookeeper: break_lock() called on the provider's thread");
  }
  const name_nodes nodes = contenders_of(*this, name, true);
  const auto removed = ask(
      [&](const auto& answer) {
        for (const contender& c : nodes.contenders) {
          if (c.holds) session().remove(c.path, answer());
        }
        for (const std::string& hold : nodes.holds) session().remove(hold, answer());
      },
      message("no answer to the deletes within release_timeout", name));
  for (const zk_reply& reply : removed) {
    if (reply.rc == ZOK || reply.rc == ZNONODE) continue;
    throw connection_error(message(
        reply.rc == ZNOAUTH ? std::string("not authorized to delete the holders' nodes (check the "
                                          "user, password and the nodes' ACL)")
                            : std::string("deleting a holder's node failed: ") + zerror(reply.rc),
        name));
  }
}

}  // namespace dlock::zookeeper::detail
