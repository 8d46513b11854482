// The etcd backend's election board, in the layout of etcd's own concurrency.Election so that
// `etcdctl elect` and dlock take part in one election: every candidate's key is
// `<queue><lease id in hex>` (the queue `<prefix>.election/<escaped name>/`), the key with the
// lowest create revision leads, and its value is the leader's value. The term is that create
// revision (the election lock's fencing token). A proclaim rewrites the leader's own key, only
// while its create revision is still the term's (concurrency.Election.Proclaim's Txn); the
// key goes with the release or the provider's lease, and the record with it. dlock's candidate
// keys start empty, and an empty value reads as "not proclaimed yet". Observers are told by a
// watch of the queue (election_watch.hpp), which sees a dead leader's end too (its key goes
// with the provider's lease), so they read the board again only once a second without news.
#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "election_watch.hpp"
#include "lease.hpp"

namespace dlock::etcd::detail {

namespace {

class etcd_election_board final : public election_board {
 public:
  explicit etcd_election_board(std::shared_ptr<etcd_backend> backend)
      : backend_(std::move(backend)) {}

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    if (!rewrite(election, leadership, std::string(value)) || leadership.lost()) {
      throw lock_lost_error(said("the lead of term " +
                                     std::to_string(leadership.fencing_token()) +
                                     " is over; proclaim refused",
                                 election));
    }
  }

  void withdraw(std::string_view election, const lease& leadership) override {
    rewrite(election, leadership, {});
  }

  std::optional<leader_info> leader(std::string_view election) override {
    const std::string queue = backend_->queue_of(resource_kind::election, election);
    pb::RangeRequest request;
    request.set_key(queue);
    request.set_range_end(prefix_end(queue));
    request.set_sort_target(pb::RangeRequest::CREATE);
    request.set_sort_order(pb::RangeRequest::ASCEND);
    request.set_limit(1);
    pb::RangeResponse response;
    check(backend_->client().range_now(request, response, timeout()), "reading the leader",
          election);
    if (response.kvs().empty() || response.kvs(0).value().empty()) return std::nullopt;
    return leader_info{response.kvs(0).value(),
                       static_cast<std::uint64_t>(response.kvs(0).create_revision())};
  }

  std::shared_ptr<void> watch(std::string_view election, std::function<void()> changed) override {
    auto watch = std::make_shared<election_watch>(
        backend_, backend_->queue_of(resource_kind::election, election), std::move(changed));
    watch->start();
    return std::shared_ptr<void>(watch.get(), [watch](election_watch*) { watch->close(); });
  }

  // Every end of a lead deletes the leader's key, which the watch sees; the read without
  // news is for a watch that broke and is not back yet.
  std::chrono::milliseconds poll_period() const override { return std::chrono::seconds(1); }

 private:
  /// Puts `value` on the leader's key if its create revision is still the term; whether it
  /// was.
  bool rewrite(std::string_view election, const lease& leadership, std::string value) {
    const auto& held = dynamic_cast<const etcd_lease&>(leadership);
    pb::TxnRequest request;
    auto& same_term = *request.add_compare();
    same_term.set_key(held.key());
    same_term.set_target(pb::Compare::CREATE);
    same_term.set_result(pb::Compare::EQUAL);
    same_term.set_create_revision(static_cast<std::int64_t>(leadership.fencing_token()));
    auto& put = *request.add_success()->mutable_request_put();
    put.set_key(held.key());
    put.set_value(std::move(value));
    put.set_lease(held.lease_id());
    pb::TxnResponse response;
    check(backend_->client().txn_now(request, response, timeout()), "writing the leader record",
          election);
    return response.succeeded();
  }

  void check(const grpc::Status& status, const std::string& what,
             std::string_view election) const {
    if (!status.ok()) throw connection_error(said(what + " failed: " + describe(status), election));
  }

  std::chrono::nanoseconds timeout() const { return backend_->settings().release_timeout; }

  std::string said(const std::string& what, std::string_view election) const {
    return backend_->message(what + " for election '" + naming::quote_for_message(election) +
                             "'");
  }

  std::shared_ptr<etcd_backend> backend_;
};

}  // namespace

std::shared_ptr<election_board> etcd_backend::elections() {
  return std::make_shared<etcd_election_board>(shared_from_this());
}

}  // namespace dlock::etcd::detail
