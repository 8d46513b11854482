#include "redlock.hpp"

#include <algorithm>
#include <stdexcept>

#include <boost/asio/steady_timer.hpp>

#include "eval.hpp"
#include "quorum_count.hpp"
#include "sentinel_master.hpp"
#include "tls_client.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

/// Collects the answers of a fan-out until its rule settles it.
struct fan_out {
  fan_out(std::size_t nodes, quorum_rule rule, fan_out_handler done)
      : results(nodes, command_result{.failure = std::string(no_reply_yet)}),
        count(nodes, rule.need),
        counts(rule.counts),
        done(std::move(done)) {}
  std::vector<command_result> results;
  quorum_count count;
  bool (*counts)(const command_result&);
  fan_out_handler done;  ///< empty once settled

  void answer(std::size_t i, command_result result) {
    if (count.decided()) return;  // settled without this node
    const bool decides = count.decides(counts(result), !result.failure);
    results[i] = std::move(result);
    if (decides) {
      auto settle = std::move(done);
      done = fan_out_handler{};
      settle(std::move(results));
    }
  }

  static reply_handler slot(const std::shared_ptr<fan_out>& all, std::size_t i) {
    return [all, i](command_result result) { all->answer(i, std::move(result)); };
  }
};

}  // namespace

bool confirmed(const command_result& result) noexcept {
  return !result.failure && !result.value.is_error();
}

std::chrono::nanoseconds clock_drift(std::chrono::nanoseconds expiry) noexcept {
  return expiry / 100 + std::chrono::milliseconds(2);
}

clock::time_point valid_until(clock::time_point sent, std::chrono::nanoseconds expiry) noexcept {
  return sent + expiry - clock_drift(expiry);
}

node_set::node_set(boost::asio::any_io_executor executor, const options& opts)
    : executor_(executor), expiry_(opts.expiry), command_timeout_(opts.command_timeout) {
  // One TLS context for every connection to every node: the files are read once.
  const auto tls = opts.tls.enabled ? std::make_shared<tls_client>(opts.tls) : nullptr;
  if (!opts.sentinel.master_name.empty()) sentinel_ = std::make_shared<sentinel_master>(opts, tls);
  std::vector<server_settings> servers;
  for (const auto& s : opts.servers) {
    servers.push_back(server_settings{.host = s.host,
                                      .port = s.port,
                                      .unix_socket = s.unix_socket,
                                      .tls = tls,
                                      .user = opts.user,
                                      .password = opts.password,
                                      .database = opts.database,
                                      .command_timeout = opts.command_timeout,
                                      .client_name = opts.client_name,
                                      .sentinel = sentinel_});
  }
  const heartbeat beat{.channel = opts.key_prefix + "heartbeat", .every = opts.expiry / 3};
  if (opts.cluster) {
    cluster_ = std::make_unique<cluster_router>(executor_, std::move(servers), beat);
    endpoint_ = cluster_->endpoint();
    return;
  }
  for (auto& s : servers) {
    nodes_.push_back(
        std::make_unique<node>(executor_, std::move(s), beat, channel_kind::plain, links_));
    if (!endpoint_.empty()) endpoint_ += ',';
    endpoint_ += nodes_.back()->endpoint();
  }
}

void node_set::eval_on(std::size_t i, const script& which, const key_set& keys,
                       const std::vector<std::string>& arguments, reply_handler done) {
  if (cluster_) {
    cluster_->eval(which, keys, arguments, std::move(done));
  } else {
    eval(*nodes_[i], which, keys, arguments, std::move(done));
  }
}

void node_set::listen(std::size_t i, const std::string& channel,
                      const std::shared_ptr<channel_listener>& listener) {
  (cluster_ ? cluster_->node_for(channel) : *nodes_[i]).listen(channel, listener);
}

void node_set::unlisten(std::size_t i, const std::string& channel,
                        const channel_listener* listener) {
  if (!cluster_) {
    nodes_[i]->unlisten(channel, listener);
    return;
  }
  // Wherever it listens: the slot may have moved since it listened.
  cluster_->for_each_node([&](node& n) { n.unlisten(channel, listener); });
}

clock::time_point node_set::subscriber_heard_at(std::size_t i, const std::string& channel) {
  return (cluster_ ? cluster_->node_for(channel) : *nodes_[i]).subscriber_heard_at();
}

void node_set::eval_everywhere(const script& which, const key_set& keys,
                               const std::vector<std::string>& arguments, quorum_rule rule,
                               fan_out_handler done) {
  auto all = std::make_shared<fan_out>(size(), rule, std::move(done));
  for (std::size_t i = 0; i < size(); ++i) {
    eval_on(i, which, keys, arguments, fan_out::slot(all, i));
  }
}

void node_set::command_everywhere(const std::vector<std::string>& arguments, quorum_rule rule,
                                  fan_out_handler done) {
  auto all = std::make_shared<fan_out>(size(), rule, std::move(done));
  if (cluster_) {
    cluster_->command(arguments, fan_out::slot(all, 0));
    return;
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->command(arguments, fan_out::slot(all, i));
  }
}

command_result node_set::eval_here(const script& which, const key_set& keys,
                                   const std::vector<std::string>& arguments) {
  if (cluster_) throw std::logic_error("dlock: redis: a cluster's commands run on its network thread");
  return detail::eval_here(*nodes_[0], which, keys, arguments);
}

void node_set::release(const key_set& keys, const std::string& token, fan_out_handler done) {
  release_everywhere(keys, token, undo::release, queue_place::leave, {}, std::move(done));
}

void node_set::give_back(const key_set& keys, const std::string& token, queue_place place,
                         std::shared_ptr<const bool> superseded) {
  release_everywhere(keys, token, undo::give_back, place, std::move(superseded), {});
}

void node_set::withdraw(const key_set& keys, const std::string& token, fan_out_handler done) {
  release_everywhere(keys, token, undo::withdraw, queue_place::leave, {}, std::move(done));
}

void node_set::release_everywhere(const key_set& keys, const std::string& token, undo what,
                                  queue_place place,
                                  std::shared_ptr<const bool> superseded,
                                  fan_out_handler done) {
  const auto until = clock::now() + expiry_;
  // A semaphore's slots are counted on every node (its acquire needs them all), so its release
  // waits for every node's answer: returning on a majority let the next acquire find the slot
  // still taken on the slowest node. A majority's confirmation is still what succeeds.
  const std::size_t heard_from = counted_on_every_node(keys.kind) ? size() : majority();
  std::shared_ptr<fan_out> all;
  if (done) all = std::make_shared<fan_out>(size(), quorum_rule{heard_from, confirmed},
                                            std::move(done));
  for (std::size_t i = 0; i < size(); ++i) {
    release_on(i, keys, token, what, place, until, superseded,
               all ? fan_out::slot(all, i) : reply_handler{});
  }
}

// A node that does not answer (paused, partitioned, restarting) may still hold the grant and
// answer later: try again until the grant would have expired anyway, or the provider is gone.
// Only the first answer goes to the caller, which settles with the majority and never waits
// for these retries.
void node_set::release_on(std::size_t i, const key_set& keys, const std::string& token,
                          undo what, queue_place place, clock::time_point until,
                          std::shared_ptr<const bool> superseded,
                          reply_handler first_answer) {
  std::weak_ptr<node_set> weak = shared_from_this();
  eval_on(i, release_script(), keys,
       {token, std::string(what == undo::withdraw ? withdraw_argument(keys.kind)
                                             : script_argument(keys.kind)),
        keys.channel, keys.publish, keys.queue, place == queue_place::keep ? "keep" : "leave",
        what == undo::release ? keys.hold : std::string()},
       [weak, i, keys, token, what, place, until, superseded,
        first_answer = std::move(first_answer)](command_result result) mutable {
         const bool retry = result.failure.has_value();
         if (first_answer) first_answer(std::move(result));
         auto self = weak.lock();
         if (!self || !retry || clock::now() >= until || (superseded && *superseded)) return;
         auto timer = std::make_shared<boost::asio::steady_timer>(self->executor_);
         timer->expires_after(std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(100),
                                                                 self->command_timeout_));
         timer->async_wait(
             [weak, timer, i, keys, token, what, place, until,
              superseded](const boost::system::error_code&) {
               if (superseded && *superseded) return;
               if (auto again = weak.lock()) {
                 again->release_on(i, keys, token, what, place, until, superseded, {});
               }
             });
       });
}

std::string node_set::failures(const std::vector<command_result>& results) const {
  std::string text;
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::string why;
    if (results[i].failure) {
      why = *results[i].failure;
    } else if (results[i].value.is_error()) {
      why = results[i].value.text;
    } else {
      continue;
    }
    if (!text.empty()) text += "; ";
    text += (size() > 1 ? nodes_[i]->endpoint() + ": " : std::string()) + why;
  }
  return text.empty() ? "no majority of the servers answered" : text;
}

}  // namespace dlock::redis::detail
