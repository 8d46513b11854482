#include "backend.hpp"

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/naming.hpp>

#include "acquire.hpp"
#include "key_layout.hpp"
#include "option_checks.hpp"

namespace dlock::etcd::detail {

namespace {

const options& validated(const options& opts) {
  validate(opts);
  return opts;
}

}  // namespace

etcd_backend::etcd_backend(options opts)
    : options_(validated(opts)),
      client_(std::make_unique<etcd_client>(options_, executor())),
      keeper_(std::make_shared<lease_keeper>(*this, *client_)),
      watcher_(std::make_shared<watcher>(*client_)) {}

etcd_backend::~etcd_backend() {
  io().stop();  // from here on, this thread alone touches the members
  watcher_->close();
  keeper_->revoke(options_.release_timeout);
  // Deletes of releases made on the io thread (a maximum hold's) land before the process goes.
  client_->shutdown(options_.release_timeout);
}

void etcd_backend::settle(std::chrono::nanoseconds bound) {
  if (running_in_this_thread()) return;
  // One thread runs the io_context's handlers in the order they were posted, and destroys each
  // before it takes the next: once this one runs, those before it are gone with what they held.
  blocking_reply<bool> settled;
  boost::asio::post(executor(), [settled] { settled.set_value(true); });
  settled.get_for(bound);
}

void etcd_backend::start() {
  // A call that waits for a connection ends in "Deadline Exceeded"; the reason it could not
  // connect (a refused TLS handshake, say) is asked for separately.
  const auto with_cause = [this](std::string failure) {
    if (std::string cause = client_->connection_failure(); !cause.empty()) {
      failure += " (" + cause + ")";
    }
    return failure;
  };
  if (const std::string failure = client_->authenticate(options_.connect_timeout);
      !failure.empty()) {
    throw connection_error(message(with_cause(failure)));
  }
  try {
    keeper_->start();
  } catch (const connection_error& e) {
    throw connection_error(with_cause(e.what()));
  }
}

std::string etcd_backend::queue_of(resource_kind kind, std::string_view name) const {
  return queue_prefix(options_.prefix, kind, name);
}

std::shared_ptr<acquire_operation> etcd_backend::start_acquire(acquire_request request,
                                                               acquire_completion done) {
  return etcd_acquire::launch(shared_from_this(), std::move(request), std::move(done));
}

std::string etcd_backend::reserve_key(const std::string& queue, std::int64_t lease_id) {
  for (std::uint64_t n = 0;; ++n) {
    std::string key = contender_key(queue, lease_id, n);
    if (reserved_.insert(key).second) return key;
  }
}

void etcd_backend::delete_key(const std::string& key, std::int64_t lease_id,
                              std::function<void(grpc::Status)> done) {
  pb::DeleteRangeRequest request;
  request.set_key(key);
  // A weak reference: a delete in flight must not keep the backend alive past its provider,
  // whose destructor waits for the delete (client shutdown) and then revokes the lease.
  client_->remove(std::move(request), [weak = weak_from_this(), key, lease_id,
                                       done = std::move(done)](grpc::Status status,
                                                               pb::DeleteRangeResponse) {
    auto self = weak.lock();
    // A key left at etcd queues ahead of every later contender for as long as its lease
    // lives, and this provider keeps the lease alive: a delete that could not reach the
    // cluster (a partition) goes out again until it lands or the lease is gone.
    if (self && !status.ok() && is_transient(status) && self->keeper_->keeps(lease_id)) {
      self->delete_later(key, lease_id);
    } else if (self) {
      self->reserved_.erase(key);
    }
    if (done) done(status);
  });
}

void etcd_backend::delete_later(const std::string& key, std::int64_t lease_id) {
  auto timer = std::make_shared<boost::asio::steady_timer>(executor(), delete_retry);
  timer->async_wait([weak = weak_from_this(), timer, key, lease_id](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    if (!self->keeper_->keeps(lease_id)) {
      self->reserved_.erase(key);  // gone with its lease
      return;
    }
    self->delete_key(key, lease_id);
  });
}

provider_health etcd_backend::health() const {
  provider_health health;
  if (auto trouble = keeper_->trouble()) {
    health.connected = false;
    health.problems.push_back(message(*trouble));
  }
  return health;
}

std::optional<std::uint32_t> etcd_backend::current_count(const acquire_request& request) {
  if (running_in_this_thread()) return std::nullopt;  // cannot wait for its own answers
  const std::string queue = queue_of(request.kind, request.name);
  pb::RangeRequest range;
  range.set_key(queue);
  range.set_range_end(prefix_end(queue));
  return call_and_wait<std::uint32_t>(
      executor(), options_.release_timeout,
      message("no answer to the count within release_timeout", request.name),
      [this, self = shared_from_this(), range = std::move(range),
       request](blocking_reply<std::uint32_t> reply) mutable {
        client_->range(std::move(range), [self, request, reply](grpc::Status status,
                                                                pb::RangeResponse response) {
          if (!status.ok()) {
            reply.set_error(std::make_exception_ptr(connection_error(
                self->message("counting failed: " + describe(status), request.name))));
            return;
          }
          std::vector<contender> queue;
          for (const auto& kv : response.kvs()) {
            queue.push_back({kv.key(), kv.value(), kv.create_revision()});
          }
          for (const contender& c : queue) {
            const auto recorded = recorded_max_count(c.value);
            if (recorded != request.max_count) {
              reply.set_error(std::make_exception_ptr(self->max_count_mismatch(
                  request, recorded.value_or(0), "in the value of key " + c.key)));
              return;
            }
          }
          const auto held = static_cast<std::uint32_t>(
              std::min<std::size_t>(queue.size(), request.max_count));
          reply.set_value(request.max_count - held);
        });
      });
}

}  // namespace dlock::etcd::detail
