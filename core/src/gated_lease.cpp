// The lease of a gated grant (see gated_lease.hpp).
#include "gated_lease.hpp"

#include <exception>
#include <stdexcept>
#include <utility>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "lock_service.hpp"

namespace dlock::detail {

namespace {

// The earlier end of the gate's and the grant's validities, followed directly rather than
// through their lost signals, which the clock thread stops a wake-up later; null when neither
// expires by the clock.
std::shared_ptr<grant_validity> earlier_of(const lease& gate, const lease& grant) {
  if (!gate.validity() && !grant.validity()) return nullptr;
  return std::make_shared<grant_validity>(gate.validity(), grant.validity());
}

// Releases `grant` for a handle that no longer wants it; nobody waits for the answer.
void release_unwanted(const std::shared_ptr<lease>& grant, lock_service& service) noexcept {
  try {
    grant->release();
  } catch (...) {
    service.report(std::current_exception());
  }
}

}  // namespace

gated_lease::gated_lease(lock_target lock, std::shared_ptr<lease> gate,
                         std::shared_ptr<lease> grant, lock_mode mode)
    : gated_lease(std::move(lock), gate, grant, mode, earlier_of(*gate, *grant)) {}

gated_lease::gated_lease(lock_target lock, std::shared_ptr<lease> gate,
                         std::shared_ptr<lease> grant, lock_mode mode,
                         std::shared_ptr<grant_validity> validity)
    : lease(grant->fencing_token(), validity),
      validity_(std::move(validity)),
      lock_(std::move(lock)),
      phase_(mode == lock_mode::shared ? phase::reading : phase::writing),
      writes_(mode == lock_mode::exclusive),
      gate_(std::move(gate)),
      grant_(std::move(grant)) {
  gate_watch_ = watch_for_loss(*gate_);
  grant_watch_ = watch_for_loss(*grant_);
}

// The members release what was never released, the grant before the gate.
gated_lease::~gated_lease() = default;

std::unique_ptr<gated_lease::watch> gated_lease::watch_for_loss(const lease& inner) {
  return std::make_unique<watch>(inner.lost_token(), std::function<void()>(
                                                         [signal = lost_signal()]() mutable {
                                                           signal.request_stop();
                                                         }));
}

void gated_lease::release() {
  std::shared_ptr<lease> gate;
  std::shared_ptr<lease> grant;
  std::unique_ptr<watch> gate_watch;
  std::unique_ptr<watch> grant_watch;
  {
    std::lock_guard lock(mutex_);
    if (phase_ == phase::released) return;
    phase_ = phase::released;
    gate = std::move(gate_);
    grant = std::move(grant_);
    gate_watch = std::move(gate_watch_);
    grant_watch = std::move(grant_watch_);
  }
  // The watches go outside the mutex: a loss being forwarded right now finishes first.
  grant_watch.reset();
  gate_watch.reset();
  std::exception_ptr first_error;
  if (grant) {
    try {
      grant->release();
    } catch (...) {
      first_error = std::current_exception();
    }
  }
  try {
    gate->release();
  } catch (...) {
    if (!first_error) first_error = std::current_exception();
  }
  if (first_error) std::rethrow_exception(first_error);
}

bool gated_lease::writes() const {
  std::lock_guard lock(mutex_);
  return writes_;
}

void gated_lease::check_upgradeable() const {
  std::lock_guard lock(mutex_);
  refuse_misuse();
}

void gated_lease::refuse_misuse() const {
  if (!writes_ && phase_ != phase::upgrading) return;
  throw std::logic_error("dlock: " + lock_.service->describe() + ": reader-writer lock '" +
                         naming::quote_for_message(lock_.name) + "' is " +
                         (writes_ ? "upgraded already; a handle upgrades once"
                                  : "being upgraded already"));
}

std::shared_ptr<lease> gated_lease::begin_upgrade() {
  std::unique_ptr<watch> grant_watch;
  std::shared_ptr<lease> read;
  {
    std::lock_guard lock(mutex_);
    refuse_misuse();
    if (phase_ == phase::released || lost()) {
      throw lock_lost_error("dlock: " + lock_.service->describe() + ": reader-writer lock '" +
                            naming::quote_for_message(lock_.name) + "' was lost before its upgrade");
    }
    phase_ = phase::upgrading;
    if (validity_) validity_->replace_second(nullptr);  // the gate alone, until the new grant
    read = std::move(grant_);
    grant_watch = std::move(grant_watch_);
  }
  return read;
}

bool gated_lease::end_upgrade(std::shared_ptr<lease> grant, lock_mode mode) {
  // Made outside the mutex: a grant lost already forwards its loss at once, and a callback on
  // this lease's lost token may release the handle.
  auto grant_watch = watch_for_loss(*grant);
  {
    std::lock_guard lock(mutex_);
    if (phase_ == phase::upgrading && !lost()) {
      set_fencing_token(grant->fencing_token());
      if (validity_) validity_->replace_second(grant->validity());
      grant_watch_ = std::move(grant_watch);
      grant_ = std::move(grant);
      phase_ = mode == lock_mode::shared ? phase::reading : phase::writing;
      writes_ = mode == lock_mode::exclusive;
      return true;
    }
  }
  grant_watch.reset();
  release_unwanted(grant, *lock_.service);
  return false;
}

void gated_lease::abandon_upgrade() noexcept {
  {
    std::lock_guard lock(mutex_);
    // Without a grant, as a lost read: a later upgrade is lock_lost_error, not "under way".
    if (phase_ == phase::upgrading) phase_ = phase::reading;
  }
  mark_lost();
}

}  // namespace dlock::detail
