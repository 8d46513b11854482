#include <dlock/zookeeper/provider.hpp>

#include <stdexcept>
#include <utility>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"
#include "lease.hpp"

namespace dlock::zookeeper {

namespace {

constexpr std::uint16_t default_port = 2181;

acl_policy parse_acl(std::string_view text) {
  if (text == "open") return acl_policy::open;
  if (text == "creator") return acl_policy::creator_only;
  if (text == "read") return acl_policy::read_only_for_others;
  throw std::invalid_argument("dlock: zookeeper URL option 'acl' must be open, creator or read, "
                              "not '" + std::string(text) + "'");
}

std::shared_ptr<detail::zookeeper_backend> make_backend(const options& opts) {
  return std::make_shared<detail::zookeeper_backend>(opts);
}

}  // namespace

provider::provider(options opts) : provider(make_backend(opts), opts.on_error) {}

provider::provider(std::shared_ptr<detail::zookeeper_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

std::string provider::lock_node_path(std::string_view name) const {
  naming::validate_name(name);
  return backend_->node_of(name);
}

std::optional<std::string> provider::granted_node(const lock_handle& handle) {
  const auto* lease = dynamic_cast<const detail::zookeeper_lease*>(dlock::granted_lease(handle));
  if (!lease) return std::nullopt;
  return lease->node();
}

void register_scheme() {
  dlock::register_scheme("zookeeper", [](provider_url url) -> std::shared_ptr<dlock::provider> {
    if (url.hosts.empty()) {
      throw std::invalid_argument("dlock: zookeeper URL '" + url.redacted() +
                                  "' needs at least one host, e.g. zookeeper://h1:2181/locks");
    }
    options opts;
    for (const auto& host : url.hosts) {
      if (!opts.hosts.empty()) opts.hosts += ',';
      opts.hosts += host.host + ":" + std::to_string(host.port.value_or(default_port));
    }
    if (!url.path.empty() && url.path != "/") opts.base_path = url.path;
    if (!url.user.empty() || url.password) {
      if (url.user.empty()) {
        throw std::invalid_argument("dlock: zookeeper URL '" + url.redacted() +
                                    "' has a password but no user");
      }
      opts.user = url.user;
      opts.password = url.password.value_or("");
    }
    for (auto [field, target] : {std::pair{"session_timeout", &opts.session_timeout},
                                  std::pair{"connect_timeout", &opts.connect_timeout},
                                  std::pair{"release_timeout", &opts.release_timeout}}) {
      if (auto value = url.take_option(field)) *target = parse_duration(field, *value);
    }
    if (auto value = url.take_option("chroot")) opts.chroot = *value;
    if (auto value = url.take_option("acl")) opts.acl = parse_acl(*value);
    url.reject_unknown_options();
    return std::make_shared<provider>(std::move(opts));
  });
}

}  // namespace dlock::zookeeper
