#include "min_hold.hpp"

#include <algorithm>
#include <charconv>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

namespace {

constexpr std::string_view hold_node_prefix = "min-hold-";

std::string taker_marker() { return std::string(hold_taker_mark) + std::string(lock_marker); }

}  // namespace

std::string hold_node_name(std::int64_t czxid) {
  return std::string(hold_node_prefix) + std::to_string(czxid);
}

std::optional<std::uint64_t> token_of_hold_node(std::string_view name) {
  if (!name.starts_with(hold_node_prefix)) return std::nullopt;
  const std::string_view digits = name.substr(hold_node_prefix.size());
  std::uint64_t token = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), token);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return token;
}

bool is_hold_node(std::string_view name) { return token_of_hold_node(name).has_value(); }

bool takes_min_hold(std::string_view name) {
  return name.find(taker_marker()) != std::string_view::npos;
}

std::optional<std::string> other_hold_node(const std::vector<std::string>& children,
                                           std::string_view own) {
  const auto found = std::find_if(children.begin(), children.end(), [&](const std::string& c) {
    return c != own && is_hold_node(c);
  });
  if (found == children.end()) return std::nullopt;
  return *found;
}

std::chrono::milliseconds ttl_of(std::chrono::nanoseconds min_hold) {
  return std::max(std::chrono::ceil<std::chrono::milliseconds>(min_hold),
                  std::chrono::milliseconds(1));
}

void end_hold_on_time(const std::shared_ptr<zookeeper_backend>& backend,
                      const min_hold_grant& hold) {
  auto timer = std::make_shared<boost::asio::steady_timer>(backend->executor(), hold.until);
  // Weak: a hold that outlives its provider is left to the server's TTL.
  timer->async_wait([weak = std::weak_ptr<zookeeper_backend>(backend), node = hold.node,
                     timer](boost::system::error_code ec) {
    auto owner = weak.lock();
    if (!ec && owner) owner->session().remove(node, [](zk_reply) {});
  });
}

std::string ask_for_ttl_nodes(const zookeeper_backend& backend) {
  // Its parent, named by a fresh protection prefix, does not exist: when the server takes TTL
  // nodes the create fails for want of it, and when it does not, before it looks.
  const std::string probe =
      backend.settings().base_path + "/" + new_protection_prefix() + "ttl-probe/probe";
  const auto replies = backend.ask(
      [&](const auto& answer) {
        backend.session().create_ttl(probe, {}, std::chrono::milliseconds(1), answer(), true);
      },
      backend.message("no answer within release_timeout when asking whether the server takes "
                      "TTL nodes (which a minimum hold needs)"));
  const int rc = replies.front().rc;
  if (rc == ZUNIMPLEMENTED) {
    return "the server does not take TTL nodes, which a hold needs to outlive its holder's "
           "session: start every server with -Dzookeeper.extendedTypesEnabled=true (or "
           "extendedTypesEnabled=true in zoo.cfg)";
  }
  if (rc == ZNONODE || rc == ZOK || rc == ZNODEEXISTS) return {};
  throw connection_error(backend.message(
      std::string("asking whether the server takes TTL nodes failed: ") + zerror(rc)));
}

}  // namespace dlock::zookeeper::detail
