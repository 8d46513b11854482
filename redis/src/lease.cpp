#include "lease.hpp"

#include "backend.hpp"

namespace dlock::redis::detail {

redis_lease::redis_lease(std::shared_ptr<redis_backend> backend,
                         std::shared_ptr<held_grant> grant, std::uint64_t fencing_token)
    : lease(fencing_token, grant->validity),
      backend_(std::move(backend)),
      grant_(std::move(grant)) {
  grant_->lost = lost_signal();
}

redis_lease::~redis_lease() {
  if (released_) return;
  try {
    backend_->release(grant_, false);
  } catch (...) {
    backend_->events().background_error(std::current_exception());
  }
}

void redis_lease::release() {
  released_ = true;
  backend_->release(grant_, true);
}

}  // namespace dlock::redis::detail
