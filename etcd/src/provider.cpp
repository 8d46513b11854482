#include <dlock/etcd/provider.hpp>

#include <stdexcept>
#include <utility>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"

namespace dlock::etcd {

namespace {

constexpr std::uint16_t default_port = 2379;

std::shared_ptr<detail::etcd_backend> make_backend(const options& opts) {
  return std::make_shared<detail::etcd_backend>(opts);
}

[[noreturn]] void reject_url(const provider_url& url, const std::string& what) {
  throw std::invalid_argument("dlock: etcd URL '" + url.redacted() + "' " + what);
}

}  // namespace

provider::provider(options opts) : provider(make_backend(opts), opts.on_error) {}

provider::provider(std::shared_ptr<detail::etcd_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

// A release posts its delete to the io thread, a handler that holds the backend: were it still queued when this provider's references go, the last one, and with it
// the backend's destructor and the lease's revoke, would go later on the io thread, after the
// caller thought the provider gone. Once the handlers queued before now have run, the last
// reference goes here (unless a lock or handle of this provider is still alive).
provider::~provider() { backend_->settle(backend_->settings().release_timeout); }

std::string provider::lock_key_prefix(std::string_view name) const {
  naming::validate_name(name);
  return backend_->queue_of(resource_kind::lock, name);
}

void register_scheme() {
  dlock::register_scheme("etcd", [](provider_url url) -> std::shared_ptr<dlock::provider> {
    if (url.hosts.empty()) {
      reject_url(url, "needs at least one host, e.g. etcd://h1:2379,h2:2379/locks");
    }
    options opts;
    for (const auto& host : url.hosts) {
      if (!opts.endpoints.empty()) opts.endpoints += ',';
      opts.endpoints += host.host + ":" + std::to_string(host.port.value_or(default_port));
    }
    // etcd://h/locks: keys under "locks/"; etcd://h or etcd://h/: the default prefix.
    if (!url.path.empty() && url.path != "/") {
      opts.prefix = url.path.substr(1);
      if (opts.prefix.back() != '/') opts.prefix += '/';
    }
    if (!url.user.empty() || url.password) {
      if (url.user.empty()) reject_url(url, "has a password but no user");
      opts.user = url.user;
      opts.password = url.password.value_or("");
    }
    for (auto [field, target] : {std::pair{"lease", &opts.lease_ttl},
                                  std::pair{"connect_timeout", &opts.connect_timeout},
                                  std::pair{"release_timeout", &opts.release_timeout}}) {
      if (auto value = url.take_option(field)) *target = parse_duration(field, *value);
    }
    if (auto value = url.take_option("tls")) opts.tls.enabled = parse_bool("tls", *value);
    for (auto [field, target] : {std::pair{"ca", &opts.tls.ca_file},
                                  std::pair{"cert", &opts.tls.cert_file},
                                  std::pair{"key", &opts.tls.key_file}}) {
      if (auto value = url.take_option(field)) {
        *target = *value;
        opts.tls.enabled = true;  // a file of TLS's means TLS
      }
    }
    url.reject_unknown_options();
    return std::make_shared<provider>(std::move(opts));
  });
}

}  // namespace dlock::etcd
