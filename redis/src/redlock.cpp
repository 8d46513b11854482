#include "redlock.hpp"

#include <algorithm>

#include <boost/asio/steady_timer.hpp>

#include "eval.hpp"

namespace dlock::redis::detail {

namespace {

using clock = std::chrono::steady_clock;

/// Counts the answers of a fan-out until every node has answered.
struct fan_out {
  explicit fan_out(std::size_t nodes, fan_out_handler done)
      : results(nodes), remaining(nodes), done(std::move(done)) {}
  std::vector<command_result> results;
  std::size_t remaining;
  fan_out_handler done;

  static reply_handler slot(const std::shared_ptr<fan_out>& all, std::size_t i) {
    return [all, i](command_result result) {
      all->results[i] = std::move(result);
      if (--all->remaining == 0) all->done(std::move(all->results));
    };
  }
};

}  // namespace

std::chrono::nanoseconds clock_drift(std::chrono::nanoseconds expiry) noexcept {
  return expiry / 100 + std::chrono::milliseconds(2);
}

clock::time_point valid_until(clock::time_point sent, std::chrono::nanoseconds expiry) noexcept {
  return sent + expiry - clock_drift(expiry);
}

node_set::node_set(boost::asio::any_io_executor executor, const options& opts)
    : executor_(executor), expiry_(opts.expiry), command_timeout_(opts.command_timeout) {
  for (const auto& s : opts.servers) {
    if (!endpoint_.empty()) endpoint_ += ',';
    endpoint_ += s.host + ":" + std::to_string(s.port);
    nodes_.push_back(std::make_unique<node>(
        executor_, server_settings{.host = s.host,
                                   .port = s.port,
                                   .user = opts.user,
                                   .password = opts.password,
                                   .database = opts.database,
                                   .command_timeout = opts.command_timeout,
                                   .client_name = opts.client_name}));
  }
}

void node_set::eval_everywhere(const script& which, const key_set& keys,
                               const std::vector<std::string>& arguments,
                               fan_out_handler done) {
  auto all = std::make_shared<fan_out>(nodes_.size(), std::move(done));
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    eval(*nodes_[i], which, keys, arguments, fan_out::slot(all, i));
  }
}

void node_set::command_everywhere(const std::vector<std::string>& arguments,
                                  fan_out_handler done) {
  auto all = std::make_shared<fan_out>(nodes_.size(), std::move(done));
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->command(arguments, fan_out::slot(all, i));
  }
}

command_result node_set::eval_here(const script& which, const key_set& keys,
                                   const std::vector<std::string>& arguments) {
  return detail::eval_here(*nodes_[0], which, keys, arguments);
}

void node_set::give_back(const key_set& keys, const std::string& token) {
  const auto until = clock::now() + expiry_;
  for (std::size_t i = 0; i < nodes_.size(); ++i) give_back_on(i, keys, token, until);
}

// A node that does not answer (paused, restarting) may still hold the grant and answer later:
// try again until the grant would have expired anyway, or the provider is gone.
void node_set::give_back_on(std::size_t i, const key_set& keys, const std::string& token,
                            clock::time_point until) {
  std::weak_ptr<node_set> weak = shared_from_this();
  eval(*nodes_[i], release_script(), keys,
       {token, std::string(script_argument(keys.kind)), keys.channel},
       [weak, i, keys, token, until](command_result result) {
         auto self = weak.lock();
         if (!self || !result.failure || clock::now() >= until) return;
         auto timer = std::make_shared<boost::asio::steady_timer>(self->executor_);
         timer->expires_after(std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(100),
                                                                 self->command_timeout_));
         timer->async_wait([weak, timer, i, keys, token, until](const boost::system::error_code&) {
           if (auto again = weak.lock()) again->give_back_on(i, keys, token, until);
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
    text += (nodes_.size() > 1 ? nodes_[i]->endpoint() + ": " : std::string()) + why;
  }
  return text.empty() ? "no majority of the servers answered" : text;
}

}  // namespace dlock::redis::detail
