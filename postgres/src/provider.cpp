#include <dlock/postgres/provider.hpp>

#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"
#include "url_options.hpp"

namespace dlock::postgres {

provider::provider(options opts)
    : provider(std::make_shared<detail::postgres_backend>(opts), opts.on_error) {}

provider::provider(std::shared_ptr<detail::postgres_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

distributed_lock provider::create_lock(const advisory_key& key) {
  return create_lock(key.name());
}

distributed_reader_writer_lock provider::create_reader_writer_lock(const advisory_key& key) {
  return create_reader_writer_lock(key.name());
}

void register_scheme() {
  auto factory = [](provider_url url) -> std::shared_ptr<dlock::provider> {
    return std::make_shared<provider>(detail::options_from_url(url));
  };
  dlock::register_scheme("postgres", factory);
  dlock::register_scheme("postgresql", factory);
}

}  // namespace dlock::postgres
