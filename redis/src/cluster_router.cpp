#include "cluster_router.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster_slots.hpp"
#include "eval.hpp"
#include "transport.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

/// MOVED redirections one command may follow before it fails: a map that keeps changing under
/// it. (ASK needs no bound of its own: the importing node runs the command, or answers TRYAGAIN,
/// which is retried only for a command timeout, or MOVED.)
constexpr int max_redirections = 8;

std::string key_of(const std::vector<std::string>& arguments) {
  if ((arguments[0] == "EVALSHA" || arguments[0] == "EVAL") && arguments.size() > 3) {
    return arguments[3];
  }
  return arguments.size() > 1 ? arguments[1] : std::string();
}

bool busy_migrating(const command_result& result) {
  return !result.failure && result.value.is_error() && result.value.text.starts_with("TRYAGAIN");
}

std::string slots_failure(const command_result& result) {
  if (result.failure) return *result.failure;
  if (result.value.text.find("cluster support disabled") != std::string::npos) {
    return "not a cluster node (" + result.value.text + ")";
  }
  if (result.value.is_error()) return result.value.text;
  return "CLUSTER SLOTS answered something else than a slot map";
}

}  // namespace

struct cluster_router::routed {
  std::vector<std::string> arguments;
  reply_handler done;
  std::uint16_t slot = 0;
  int redirections = 0;
  clock::time_point started = clock::now();
};

cluster_router::cluster_router(boost::asio::any_io_executor executor,
                               std::vector<server_settings> seeds, heartbeat beat)
    : executor_(executor),
      seeds_(std::move(seeds)),
      heartbeat_(std::move(beat)),
      slots_(cluster_slot_count, nullptr) {
  endpoint_ = "cluster ";
  for (const auto& seed : seeds_) {
    if (&seed != &seeds_.front()) endpoint_ += ',';
    endpoint_ += endpoint_text(seed);
  }
}

cluster_router::~cluster_router() = default;

node& cluster_router::node_at(const std::string& host, std::uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  auto it = nodes_.find(where);
  if (it == nodes_.end()) {
    server_settings settings = seeds_.front();
    settings.host = host;
    settings.port = port;
    it = nodes_
             .emplace(where, std::make_unique<node>(executor_, std::move(settings), heartbeat_,
                                                    channel_kind::sharded))
             .first;
  }
  return *it->second;
}

node& cluster_router::node_for(const std::string& key) {
  node* master = slots_[hash_slot(key)];
  return master ? *master : node_at(seeds_.front().host, seeds_.front().port);
}

void cluster_router::for_each_node(const std::function<void(node&)>& visit) {
  for (auto& [where, n] : nodes_) visit(*n);
}

std::vector<node*> cluster_router::known_masters() const {
  std::vector<node*> masters;
  for (node* master : slots_) {
    if (master && std::find(masters.begin(), masters.end(), master) == masters.end()) {
      masters.push_back(master);
    }
  }
  return masters;
}

void cluster_router::masters(masters_handler done) {
  if (map_loaded_) {
    done(known_masters(), std::nullopt);
    return;
  }
  // A routed command waits for the map (slot 0's master answers it).
  command({"PING"}, [this, alive = std::weak_ptr<bool>(alive_),
                     done = std::move(done)](command_result result) mutable {
    if (alive.expired()) return;
    if (!map_loaded_) {
      done({}, result.failure.value_or("no slot map"));
      return;
    }
    done(known_masters(), std::nullopt);
  });
}

void cluster_router::eval(const script& which, const key_set& keys,
                          const std::vector<std::string>& arguments, reply_handler done) {
  eval_with([this](std::vector<std::string> command,
                   reply_handler answer) { this->command(std::move(command), std::move(answer)); },
            which, keys, arguments, std::move(done));
}

void cluster_router::command(std::vector<std::string> arguments, reply_handler done) {
  auto routed_command = std::make_shared<routed>();
  routed_command->slot = hash_slot(key_of(arguments));
  routed_command->arguments = std::move(arguments);
  routed_command->done = std::move(done);
  send(std::move(routed_command));
}

void cluster_router::send(std::shared_ptr<routed> command) {
  node* master = map_loaded_ ? slots_[command->slot] : nullptr;
  if (!master) {
    // No map yet, or a slot no master serves (being failed over): ask for the map first.
    waiting_for_map_.push_back(std::move(command));
    refresh();
    return;
  }
  send_to(*master, std::move(command), false);
}

void cluster_router::send_to(node& target, std::shared_ptr<routed> command, bool asking) {
  // ASKING holds for the next command on the same connection, which this one is: commands on
  // a node's connection go out in order.
  if (asking) target.command({"ASKING"}, [](command_result) {});
  target.command(command->arguments, [this, alive = std::weak_ptr<bool>(alive_), &target,
                                      command](command_result result) mutable {
    if (alive.expired()) return;
    answered(target, std::move(command), std::move(result));
  });
}

void cluster_router::answered(node& asked, std::shared_ptr<routed> command,
                              command_result result) {
  if (result.failure) {
    // The master may have failed over: the next command goes by a fresh map.
    result.failure = asked.endpoint() + ": " + *result.failure;
    refresh();
    command->done(std::move(result));
    return;
  }
  if (busy_migrating(result)) {
    // A script whose keys are split, or not all there yet, while its slot migrates: the
    // migration ends soon, or this gives up after a command timeout with the server's words.
    if (clock::now() - command->started < asked.settings().command_timeout) {
      retry_later(std::move(command));
    } else {
      result.failure = asked.endpoint() + ": " + result.value.text +
                       " (its slot was migrating for a whole command timeout)";
      command->done(std::move(result));
    }
    return;
  }
  const auto to = parse_redirection(result.value);
  if (!to) {
    command->done(std::move(result));
    return;
  }
  if (!to->ask && ++command->redirections > max_redirections) {
    result.failure = asked.endpoint() + ": still redirected after " +
                     std::to_string(max_redirections) + " MOVED redirections (" +
                     result.value.text + ")";
    command->done(std::move(result));
    return;
  }
  node& target = node_at(to->host.empty() ? asked.settings().host : to->host, to->port);
  if (!to->ask) {
    // The slot lives there now; the rest of the map may have changed as well.
    slots_[to->slot] = &target;
    refresh();
  }
  send_to(target, std::move(command), to->ask);
}

void cluster_router::retry_later(std::shared_ptr<routed> command) {
  auto timer = std::make_shared<boost::asio::steady_timer>(executor_);
  timer->expires_after(std::chrono::milliseconds(5));
  timer->async_wait([this, alive = std::weak_ptr<bool>(alive_), timer,
                     command = std::move(command)](const boost::system::error_code&) mutable {
    if (!alive.expired()) send(std::move(command));
  });
}

// One refresh at a time; a change seen while one is under way asks again once it ends.
void cluster_router::refresh() {
  if (refreshing_) {
    refresh_again_ = true;
    return;
  }
  refreshing_ = true;
  refresh_again_ = false;
  // The masters of the map first (they know it best), then the seeds.
  std::vector<node*> candidates = known_masters();
  for (const auto& seed : seeds_) {
    node* n = &node_at(seed.host, seed.port);
    if (std::find(candidates.begin(), candidates.end(), n) == candidates.end()) {
      candidates.push_back(n);
    }
  }
  ask_for_slots(std::move(candidates), 0, {});
}

void cluster_router::ask_for_slots(std::vector<node*> candidates, std::size_t next,
                                   std::vector<std::string> failures) {
  if (next == candidates.size()) {
    map_known(std::move(failures));
    return;
  }
  node& asked = *candidates[next];
  asked.command({"CLUSTER", "SLOTS"}, [this, alive = std::weak_ptr<bool>(alive_), &asked,
                                       candidates = std::move(candidates), next,
                                       failures = std::move(failures)](
                                          command_result result) mutable {
    if (alive.expired()) return;
    const auto ranges = result.failure ? std::nullopt
                                       : parse_cluster_slots(result.value, asked.settings().host);
    if (!ranges || ranges->empty()) {
      failures.push_back(asked.endpoint() + ": " +
                         (ranges ? std::string("no slot is served (cluster not set up)")
                                 : slots_failure(result)));
      ask_for_slots(std::move(candidates), next + 1, std::move(failures));
      return;
    }
    std::fill(slots_.begin(), slots_.end(), nullptr);
    for (const auto& range : *ranges) {
      node& master = node_at(range.host, range.port);
      std::fill(slots_.begin() + range.first, slots_.begin() + range.last + 1, &master);
    }
    map_loaded_ = true;
    map_known({});
  });
}

// Sends what waited for the map, or fails it with what each node said when no node gave one.
void cluster_router::map_known(std::vector<std::string> failures) {
  refreshing_ = false;
  auto waiting = std::move(waiting_for_map_);
  waiting_for_map_.clear();
  std::string why;
  if (!failures.empty()) {
    why = "no node of the cluster gave its slot map: ";
    for (const auto& failure : failures) {
      why += failure;
      if (&failure != &failures.back()) why += "; ";
    }
  }
  // A handler may end the provider, and this router with it (its last owner gone on this
  // thread): then the rest are dropped unanswered, as its connections drop theirs.
  const std::weak_ptr<bool> alive = alive_;
  for (auto& command : waiting) {
    if (alive.expired()) return;
    if (!map_loaded_ || !slots_[command->slot]) {
      command->done(command_result{
          .failure = why.empty() ? "slot " + std::to_string(command->slot) +
                                       " is served by no master of " + endpoint_
                                 : why});
      continue;
    }
    node& master = *slots_[command->slot];
    send_to(master, std::move(command), false);
  }
  if (!alive.expired() && refresh_again_) refresh();
}

}  // namespace dlock::redis::detail
