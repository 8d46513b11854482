#include <dlock/core/provider.hpp>

#include <algorithm>
#include <stdexcept>

#include <dlock/core/backend/held_check.hpp>
#include <dlock/core/backend/naming.hpp>

#include "lock_service.hpp"

namespace dlock {

provider::provider(std::shared_ptr<backend> backend, error_handler on_error)
    : service_(std::make_shared<detail::lock_service>(std::move(backend), std::move(on_error))) {}

distributed_lock provider::create_lock(std::string_view name) {
  naming::validate_name(name);
  service_->backend().check_name(resource_kind::lock, name);
  detail::lock_target target{service_, resource_kind::lock, std::string(name), 1,
                            service_->default_max_hold()};
  target.min_hold = service_->default_min_hold();
  return distributed_lock(std::move(target));
}

distributed_reader_writer_lock provider::create_reader_writer_lock(std::string_view name) {
  naming::validate_name(name);
  service_->backend().check_name(resource_kind::reader_writer_lock, name);
  return distributed_reader_writer_lock(
      detail::lock_target{service_, resource_kind::reader_writer_lock, std::string(name), 1,
                          service_->default_max_hold()});
}

distributed_semaphore provider::create_semaphore(std::string_view name, std::uint32_t max_count) {
  naming::validate_name(name);
  service_->backend().check_name(resource_kind::semaphore, name);
  if (max_count == 0) {
    throw std::invalid_argument("dlock: max_count of semaphore '" +
                                naming::quote_for_message(name) + "' must be at least 1");
  }
  return distributed_semaphore(
      detail::lock_target{service_, resource_kind::semaphore, std::string(name), max_count,
                          service_->default_max_hold()});
}

provider_metrics provider::metrics() const noexcept { return service_->stats().snapshot(); }

provider_health provider::health() const { return service_->backend().health(); }

void provider::set_metrics_sink(std::shared_ptr<metrics_sink> sink) {
  service_->stats().set_sink(std::move(sink));
}

void provider::set_default_max_hold(std::chrono::nanoseconds limit) {
  if (limit < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("dlock: negative default max_hold");
  }
  service_->set_default_max_hold(limit);
}

void provider::set_default_min_hold(std::chrono::nanoseconds min_hold) {
  detail::check_min_hold(*service_, min_hold, "the provider's locks");
  service_->set_default_min_hold(min_hold);
}

void provider::set_owner(std::string owner) {
  validate_owner(owner);
  service_->set_owner(std::move(owner));
}

std::string provider::owner() const { return service_->owner(); }

lock_inspection provider::inspect(std::string_view name) const {
  naming::validate_name(name);
  return service_->backend().inspect(std::string(name));
}

std::vector<lock_inspection> provider::list_locks(std::string_view prefix) const {
  auto found = service_->backend().list_locks(std::string(prefix));
  // Held longest first; names held since an unknown time (etcd keeps none) next, in the
  // backend's order (etcd's: oldest key first); names nobody holds (only waited for) last, by
  // name.
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    const auto a_since = a.held_since();
    const auto b_since = b.held_since();
    if (a_since.has_value() != b_since.has_value()) return a_since.has_value();
    if (a_since && *a_since != *b_since) return *a_since < *b_since;
    if (!a_since && a.held() != b.held()) return a.held();
    if (!a_since && a.held()) return false;
    return a.name < b.name;
  });
  return found;
}

void provider::break_lock(std::string_view name) {
  naming::validate_name(name);
  service_->backend().break_lock(std::string(name));
}

std::optional<std::chrono::nanoseconds> check_held_by_caller(provider& p) {
  auto* check = p.service_->backend().as_caller_loss_check();
  return check ? check->check_held_by_caller() : std::nullopt;
}
void check_held_locks(provider& p) {
  if (auto* check = p.service_->backend().as_caller_loss_check()) check->check_held_locks();
}

std::string_view provider::scheme() const noexcept { return service_->backend().scheme(); }
std::string provider::endpoint() const { return service_->backend().endpoint(); }
boost::asio::any_io_executor provider::get_executor() const {
  return service_->backend().executor();
}

}  // namespace dlock
