#include <dlock/mysql/provider.hpp>

#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"
#include "url_options.hpp"

namespace dlock::mysql {

provider::provider(options opts)
    : provider(std::make_shared<detail::mysql_backend>(opts), opts.on_error) {}

provider::provider(std::shared_ptr<detail::mysql_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

void register_scheme() {
  auto factory = [](provider_url url) -> std::shared_ptr<dlock::provider> {
    return std::make_shared<provider>(detail::options_from_url(url));
  };
  dlock::register_scheme("mysql", factory);
  dlock::register_scheme("mariadb", factory);
}

}  // namespace dlock::mysql
