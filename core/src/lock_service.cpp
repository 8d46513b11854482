#include "lock_service.hpp"

namespace dlock::detail {

lock_service::lock_service(std::shared_ptr<dlock::backend> backend, error_handler on_error)
    : backend_(std::move(backend)),
      stats_(std::make_shared<provider_stats>()),
      owner_(default_owner()) {
  stats_->on_error = std::move(on_error);
  stats_->backend_label = backend_->scheme();
  backend_->attach_events(events_into(stats_));
  backend_->start();
}

std::string lock_service::describe() const {
  return std::string(backend_->scheme()) + ' ' + backend_->endpoint();
}

}  // namespace dlock::detail
