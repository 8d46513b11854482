// What etcd shows an inspector, and an administrator's break (docs/etcd.md, "What inspect can
// see"). Every contender is a key of its queue, holders and waiters alike: its value carries
// the owner (key_layout.hpp), its create revision is its place and its fencing token, its
// lease the time left. etcd keeps no time per key, so `since` stays empty. Who holds is
// decided by the acquire's own rules (queue_verdict), from one read of the queues.
#include <algorithm>
#include <map>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "key_layout.hpp"

namespace dlock::etcd::detail {

namespace {

// One key of a name's queue, judged.
struct queued_key {
  resource_kind queue_kind;
  ::mvccpb::KeyValue kv;
  party_kind kind = party_kind::exclusive;
  bool holds = false;
};

// The queues inspect() shows; a break also frees the upgrade gate.
constexpr resource_kind shown_queues[] = {resource_kind::lock, resource_kind::reader_writer_lock,
                                          resource_kind::semaphore};

pb::RangeRequest listing(const std::string& from, const std::string& to) {
  pb::RangeRequest range;
  range.set_key(from);
  range.set_range_end(to);
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_sort_target(pb::RangeRequest::CREATE);
  return range;
}

// A queue in create-revision order, judged as its contenders judge themselves: a lock's or
// the gate's first key holds; a writer (or a stranger's key) when no key is before it, a reader
// when no writer is; the first max_count keys of a semaphore.
std::vector<queued_key> judged(resource_kind queue_kind,
                               const std::vector<::mvccpb::KeyValue>& keys,
                               std::optional<std::uint32_t>& max_count) {
  std::vector<queued_key> out;
  bool anyone_before = false;
  bool writer_before = false;
  std::optional<std::uint64_t> count;
  if (queue_kind == resource_kind::semaphore && !keys.empty()) {
    count = recorded_max_count(keys.front().value());
    if (count && *count > 0 && *count <= UINT32_MAX) {
      max_count = static_cast<std::uint32_t>(*count);
    }
  }
  for (std::size_t at = 0; at < keys.size(); ++at) {
    queued_key key{queue_kind, keys[at]};
    switch (queue_kind) {
      case resource_kind::reader_writer_lock: {
        const bool reader = parse_value(queue_kind, keys[at].value()).mark == "read";
        key.kind = reader ? party_kind::read : party_kind::write;
        key.holds = reader ? !writer_before : !anyone_before;
        writer_before = writer_before || !reader;
        break;
      }
      case resource_kind::semaphore:
        key.kind = party_kind::semaphore_slot;
        key.holds = !count || at < *count;
        break;
      default:
        key.holds = at == 0;
        break;
    }
    anyone_before = true;
    out.push_back(std::move(key));
  }
  return out;
}

std::vector<queued_key> judged(const queues_by_kind& queues,
                               std::optional<std::uint32_t>& max_count) {
  std::vector<queued_key> all;
  for (const auto& [kind, queue] : queues) {
    for (queued_key& key : judged(kind, queue, max_count)) all.push_back(std::move(key));
  }
  std::stable_sort(all.begin(), all.end(), [](const queued_key& a, const queued_key& b) {
    return a.kv.create_revision() < b.kv.create_revision();
  });
  return all;
}

// Where a key of the provider's prefix belongs: the kind of its queue and the escaped name,
// or nothing for keys of elections, gates and strangers.
std::optional<std::pair<resource_kind, std::string_view>> place_of(std::string_view rest) {
  resource_kind kind = resource_kind::lock;
  for (auto [segment, segment_kind] : {std::pair{std::string_view(".rw/"),
                                                 resource_kind::reader_writer_lock},
                                       std::pair{std::string_view(".semaphore/"),
                                                 resource_kind::semaphore}}) {
    if (rest.starts_with(segment)) {
      kind = segment_kind;
      rest.remove_prefix(segment.size());
    }
  }
  const auto slash = rest.find('/');
  if (rest.empty() || rest.front() == '.' || slash == std::string_view::npos || slash == 0) {
    return std::nullopt;
  }
  return std::pair{kind, rest.substr(0, slash)};
}

}  // namespace

void etcd_backend::check(const grpc::Status& status, std::string_view what,
                         std::string_view name) const {
  if (!status.ok()) {
    const std::string failure = std::string(what) + " failed: " + describe(status);
    throw connection_error(name.empty() ? message(failure) : message(failure, name));
  }
}

queues_by_kind etcd_backend::read_queues(const std::string& name, bool with_gate) {
  std::vector<resource_kind> kinds(std::begin(shown_queues), std::end(shown_queues));
  if (with_gate) kinds.push_back(resource_kind::upgrade_gate);
  // One Txn: every queue as it was at one revision.
  pb::TxnRequest txn;
  for (resource_kind kind : kinds) {
    const std::string queue = queue_of(kind, name);
    *txn.add_success()->mutable_request_range() = listing(queue, prefix_end(queue));
  }
  pb::TxnResponse response;
  check(client_->txn_now(txn, response, options_.release_timeout), "reading the queues", name);
  queues_by_kind queues;
  for (std::size_t at = 0; at < kinds.size(); ++at) {
    const auto& kvs = response.responses(static_cast<int>(at)).response_range().kvs();
    if (!kvs.empty()) queues[kinds[at]].assign(kvs.begin(), kvs.end());
  }
  return queues;
}

lock_inspection etcd_backend::inspection_of(const std::string& name, const queues_by_kind& queues,
                                            time_left_by_lease& leases) {
  lock_inspection found{.name = name};
  for (const queued_key& key : judged(queues, found.max_count)) {
    const std::int64_t lease_id = key.kv.lease();
    if (lease_id != 0 && !leases.contains(lease_id)) {
      pb::LeaseTimeToLiveResponse alive;
      check(client_->time_to_live_now(lease_id, alive, options_.release_timeout),
            "asking for the time left on a lease", name);
      // -1: the lease ran out since the read, and its keys with it.
      leases[lease_id] = alive.ttl() < 0
                             ? std::nullopt
                             : std::optional<std::chrono::nanoseconds>(
                                   std::chrono::seconds(alive.ttl()));
    }
    (key.holds ? found.holders : found.waiters)
        .push_back(lock_party{
            .kind = key.kind,
            .fencing_token = static_cast<std::uint64_t>(key.kv.create_revision()),
            .lease_left = lease_id != 0 ? leases[lease_id] : std::nullopt,
            .owner = std::string(parse_value(key.queue_kind, key.kv.value()).owner)});
  }
  return found;
}

lock_inspection etcd_backend::inspect(const std::string& name) {
  time_left_by_lease leases;
  return inspection_of(name, read_queues(name, false), leases);
}

std::vector<lock_inspection> etcd_backend::list_locks(const std::string& prefix) {
  const std::string& base = options_.prefix;
  // An empty prefix: every key ("\0" to "\0"), as etcd has no empty key.
  const std::string from = base.empty() ? std::string(1, '\0') : base;
  pb::RangeResponse response;
  check(client_->range_now(listing(from, prefix_end(base)), response, options_.release_timeout),
        "listing " + base, {});
  // Names in the order of their oldest key: the create revision rises with every write, so
  // the oldest holder comes first (etcd keeps no time to sort by).
  std::vector<std::string> names;
  std::map<std::string, queues_by_kind> by_name;
  for (const ::mvccpb::KeyValue& kv : response.kvs()) {
    const auto place = place_of(std::string_view(kv.key()).substr(base.size()));
    if (!place) continue;
    std::string name = naming::unescape_segment(place->second);
    if (!name.starts_with(prefix)) continue;
    auto [at, added] = by_name.try_emplace(name);
    if (added) names.push_back(name);
    at->second[place->first].push_back(kv);
  }
  time_left_by_lease leases;
  std::vector<lock_inspection> found;
  for (const std::string& name : names) {
    found.push_back(inspection_of(name, by_name[name], leases));
  }
  std::stable_partition(found.begin(), found.end(),
                        [](const lock_inspection& one) { return one.held(); });
  return found;
}

// The holders' keys go, each only while it is the key that was read (a Txn of one compare per
// key, nested in one Txn so a key released meanwhile spares the others). Each holder's watch
// on its key marks its handle lost; waiters' keys stay and move up, and the next grant's key
// is written later, so its create revision (the token) is higher. Elections are left alone.
void etcd_backend::break_lock(const std::string& name) {
  std::optional<std::uint32_t> max_count;
  pb::TxnRequest txn;
  for (const queued_key& key : judged(read_queues(name, true), max_count)) {
    if (!key.holds) continue;
    pb::TxnRequest* one = txn.add_success()->mutable_request_txn();
    pb::Compare* same = one->add_compare();
    same->set_key(key.kv.key());
    same->set_target(pb::Compare::CREATE);
    same->set_result(pb::Compare::EQUAL);
    same->set_create_revision(key.kv.create_revision());
    one->add_success()->mutable_request_delete_range()->set_key(key.kv.key());
  }
  if (txn.success().empty()) return;
  pb::TxnResponse response;
  check(client_->txn_now(txn, response, options_.release_timeout), "deleting the holders' keys",
        name);
}

}  // namespace dlock::etcd::detail
