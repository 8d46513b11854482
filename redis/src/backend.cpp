#include "backend.hpp"

#include <algorithm>
#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/errors.hpp>

#include "acquire.hpp"
#include "acquire_answer.hpp"
#include "dotnet_layout.hpp"
#include "lease.hpp"
#include "redlock.hpp"
#include "scripts.hpp"
#include "sentinel_master.hpp"
#include "token.hpp"
#include "validated_options.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

/// How many of a release's `results` confirmed it (deleted, or found nothing of ours).
std::size_t confirmations(const std::vector<command_result>& results) {
  return static_cast<std::size_t>(std::count_if(results.begin(), results.end(), confirmed));
}

/// A node's slot count that counts toward the quorum (not a max_count mismatch).
bool counted_slots(const command_result& r) {
  return !r.failure && r.value.is_integer_pair() && r.value.elements[0].integer != -2;
}

}  // namespace

redis_backend::redis_backend(options opts)
    : options_(validated(std::move(opts))),
      keys_(options_.key_prefix, options_.plain_keys, options_.layout, options_.cluster),
      network_(std::make_unique<io_thread>()),
      nodes_(std::make_shared<node_set>(network_->executor(), options_)),
      watchdog_(*this) {
  // The network thread stops before the backend goes: `this` outlives every connection.
  nodes_->links().on_reconnected([this] { events().reconnected(); });
  if (const auto& sentinel = nodes_->sentinel()) {
    follower_ = std::make_unique<sentinel_follower>(network_->executor(), sentinel);
    // Asynchronous replication: a grant made on the old master may be missing on the new one.
    // So on a move every held lease is extended at once, which proves it there or finds it
    // lost; after an announced switch, connections made before may still reach the old
    // master (now a replica): they go, and the next command finds the new one.
    sentinel->on_change([this](const std::string& why, bool announced) {
      boost::asio::post(network_->executor(), [weak = weak_from_this(), why, announced] {
        auto self = weak.lock();
        if (!self) return;
        if (announced) self->nodes_->at(0).drop(why);
        self->watchdog_.verify_now();
      });
    });
  }
}

redis_backend::~redis_backend() {
  network_->stop();
  io().stop();
  // After the thread ended (or on it, when it is the one destroying us): hiredis contexts
  // and their descriptors go before the io_context they are bound to.
  watchdog_.shut_down();
  follower_.reset();
  nodes_.reset();
}

std::string redis_backend::min_hold_refusal() const {
  // The hold lives in a key beside the lock's (key_set::hold), in its hash tag. A plain key
  // has no tag, so the key beside it could be another lock's name, and other clients of a
  // plain key (.NET's DistributedLock.Redis among them) would not keep the hold.
  if (keys_.dotnet_layout()) {
    return "layout=dotnet keeps a lock in .NET's plain key, with no room for a hold beside it";
  }
  if (options_.plain_keys) {
    return "plain_keys keeps a lock in a plain key, with no room for a hold beside it";
  }
  return {};
}

std::unique_ptr<lease> redis_backend::try_acquire_inline(const acquire_request& request) {
  const key_set keys = keys_for(request);
  const std::string token = random_token();
  const auto sent = clock::now();
  const acquire_answer answer = read_acquire_answer(nodes_->eval_here(
      acquire_script(), keys,
      {token, milliseconds_argument(options_.expiry), std::string(script_argument(keys.kind)),
       "0", std::to_string(request.max_count), "0", "", request.owner, keys.queue, "",
       milliseconds_argument(request.min_hold), keys.hold}));
  // Hands back what the try may hold, from the network thread. Weakly: a strong reference
  // queued on its own network thread would keep the backend (and that thread) alive forever.
  const auto give_back = [&] {
    boost::asio::post(network_->executor(), [weak = weak_from_this(), keys, token] {
      if (auto self = weak.lock()) self->nodes_->give_back(keys, token);
    });
  };
  switch (answer.outcome) {
    case acquire_answer::kind::granted: {
      // A reply read after the grant's validity (this thread was stopped or starved in
      // between) is void, as with RedLock: the lock may be someone else's by now.
      const auto deadline = valid_until(sent, options_.expiry);
      if (clock::now() >= deadline) {
        give_back();
        return nullptr;
      }
      return grant(request.name, keys, token, deadline, static_cast<std::uint64_t>(answer.value));
    }
    case acquire_answer::kind::other_max_count:
      throw max_count_mismatch(request, answer.value);
    case acquire_answer::kind::wrong_type:
      throw key_clash(request, keys, answer.failure);
    case acquire_answer::kind::failed:
      // Without a reply it may have been granted all the same.
      give_back();
      throw connection_error(message(answer.failure, request.name));
    default:
      return nullptr;
  }
}

void redis_backend::check_name(resource_kind kind, std::string_view name) const {
  if (!keys_.dotnet_layout() || !options_.cluster) return;
  // The keys' slots, as an acquire would check them; a reader-writer lock's modes share keys.
  (void)keys_for(acquire_request{.kind = kind, .name = std::string(name)});
}

std::invalid_argument redis_backend::key_clash(const acquire_request& request,
                                               const key_set& keys,
                                               const std::string& reply) const {
  if (keys_.dotnet_layout()) {
    return std::invalid_argument(message(dotnet_key_clash(keys.keys[0]), request.name));
  }
  return std::invalid_argument(
      message("a key of this name holds a value dlock did not write there (" + reply + ")",
              request.name));
}

void redis_backend::follow_sentinel() {
  if (!follower_ || following_.exchange(true)) return;
  boost::asio::post(network_->executor(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->follower_->start();
  });
}

std::string redis_backend::epoch_key() const {
  return nodes_->sentinel() ? nodes_->sentinel()->epoch_key() : std::string();
}

std::shared_ptr<acquire_operation> redis_backend::start_acquire(acquire_request request,
                                                                acquire_completion done) {
  follow_sentinel();
  return start_acquire_on_network_thread(shared_from_this(), std::move(request), std::move(done));
}

std::optional<std::uint32_t> redis_backend::current_count(const acquire_request& request) {
  if (network_->running_in_this_thread()) {
    throw std::logic_error("dlock: redis: current_count() called on the network thread");
  }
  const key_set keys = keys_for(request);
  return call_and_wait<std::uint32_t>(
      network_->executor(), options_.release_timeout,
      message("no answer to the slot count", request.name),
      [this, keys, request](const blocking_reply<std::uint32_t>& reply) {
        nodes_->eval_everywhere(
            count_script(), keys, {std::to_string(request.max_count)},
            {nodes_->quorum(keys.kind), counted_slots},
            [this, reply, keys, request](std::vector<command_result> results) {
              long long held = 0;
              std::size_t answered = 0;
              for (const auto& r : results) {
                if (r.failure || !r.value.is_integer_pair()) continue;
                if (r.value.elements[0].integer == -2) {
                  reply.set_error(std::make_exception_ptr(
                      max_count_mismatch(request, r.value.elements[1].integer)));
                  return;
                }
                ++answered;
                held = std::max(held, r.value.elements[0].integer);
              }
              if (answered < nodes_->quorum(keys.kind)) {
                reply.set_error(std::make_exception_ptr(
                    connection_error(message(nodes_->failures(results), request.name))));
                return;
              }
              reply.set_value(static_cast<std::uint32_t>(
                  std::max<long long>(0, static_cast<long long>(request.max_count) - held)));
            });
      });
}

provider_health redis_backend::health() const {
  // A lease confirmed on time keeps at least this much validity: the extension is sent
  // within extend_every of the last one and answered within command_timeout.
  const auto on_time = options_.expiry - clock_drift(options_.expiry) - options_.extend_every -
                       options_.command_timeout;
  provider_health health;
  const auto unreachable = nodes_->links().unreachable();
  for (const auto& server : unreachable) {
    health.problems.push_back(
        message("cannot reach " + server.endpoint + " (" + server.why + ")"));
  }
  // RedLock works on while a majority answers; one server, or Sentinel's master, must.
  health.connected = nodes_->size() - std::min(unreachable.size(), nodes_->size()) >=
                     nodes_->majority();
  health.overdue_leases = watchdog_.overdue(clock::now(), on_time);
  if (health.overdue_leases > 0) {
    health.problems.push_back(message(
        std::to_string(health.overdue_leases) +
        " held lease(s) overdue for extension: not confirmed by the server within extend_every "
        "plus command_timeout; lost when their expiry runs out unconfirmed"));
  }
  return health;
}

std::unique_ptr<lease> redis_backend::grant(const std::string& name, const key_set& keys,
                                            const std::string& token,
                                            clock::time_point valid_until,
                                            std::uint64_t fencing_token) {
  auto held = std::make_shared<held_grant>();
  held->name = name;
  held->keys = keys;
  held->token = token;
  held->validity = std::make_shared<grant_validity>(valid_until);
  auto granted = std::make_unique<redis_lease>(shared_from_this(), held, fencing_token);
  watchdog_.watch(std::move(held));
  return granted;
}

void redis_backend::release(const std::shared_ptr<held_grant>& grant, bool wait) {
  // First thing: the watchdog must never extend a grant that is being released.
  watchdog_.forget(grant);
  if (wait && on_callers_thread() && !network_->running_in_this_thread()) {
    // One server: straight from the caller's thread, no hop to the network thread and back.
    const command_result result = nodes_->eval_here(
        release_script(), grant->keys,
        {grant->token, std::string(script_argument(grant->keys.kind)), grant->keys.channel,
         grant->keys.publish, grant->keys.queue, "leave", grant->keys.hold});
    if (result.failure) {
      // It may reach the server late (a silent server): retry it from the network thread
      // until the grant would have expired: as a release, which keeps a minimum hold (a
      // give-back would end it).
      boost::asio::post(network_->executor(), [weak = weak_from_this(), grant] {
        if (auto self = weak.lock()) self->nodes_->release(grant->keys, grant->token, {});
      });
    }
    if (result.failure || result.value.is_error()) {
      throw connection_error(
          message("release failed: " + nodes_->failures({result}), grant->name));
    }
    return;
  }
  if (!wait || network_->running_in_this_thread()) {
    boost::asio::post(network_->executor(), [weak = weak_from_this(), grant] {
      auto self = weak.lock();
      if (!self) return;
      self->nodes_->release(
          grant->keys, grant->token, [weak, grant](std::vector<command_result> results) {
            auto self = weak.lock();
            if (!self || confirmations(results) >= self->nodes_->majority()) return;
            self->events().background_error(std::make_exception_ptr(connection_error(
                self->message("release failed: " + self->nodes_->failures(results),
                              grant->name))));
          });
    });
    return;
  }
  call_and_wait<bool>(
      network_->executor(), options_.release_timeout,
      message("no answer to the release within release_timeout", grant->name),
      [this, grant](const blocking_reply<bool>& reply) {
        // Settles once a majority confirmed (a semaphore's: once every node answered): a
        // silent node is retried behind the caller's back until the grant would have expired
        // (node_set::release).
        nodes_->release(
            grant->keys, grant->token, [this, reply, grant](std::vector<command_result> results) {
              if (confirmations(results) < nodes_->majority()) {
                reply.set_error(std::make_exception_ptr(connection_error(
                    message("release failed: " + nodes_->failures(results), grant->name))));
              } else {
                reply.set_value(true);
              }
            });
      });
}

}  // namespace dlock::redis::detail
