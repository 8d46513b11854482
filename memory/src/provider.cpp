#include <dlock/memory/provider.hpp>

#include <stdexcept>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"

namespace dlock::memory {

provider::provider(options opts)
    : provider(std::make_shared<detail::memory_backend>(opts.domain), opts.on_error) {}

provider::provider(std::shared_ptr<detail::memory_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

void register_scheme() {
  dlock::register_scheme("memory", [](provider_url url) -> std::shared_ptr<dlock::provider> {
    if (!url.hosts.empty() || !url.user.empty() || url.password) {
      throw std::invalid_argument("dlock: memory URL '" + url.redacted() +
                                  "' must not name a host or user; use memory:///domain");
    }
    url.reject_unknown_options();
    std::string domain = url.path.empty() ? "" : url.path.substr(1);
    return std::make_shared<provider>(options{.domain = std::move(domain)});
  });
}

}  // namespace dlock::memory
