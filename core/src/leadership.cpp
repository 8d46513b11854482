// dlock::leadership: the election's lock handle and the record beside it.
#include <dlock/core/election.hpp>

#include <stdexcept>

#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "lock_service.hpp"

namespace dlock {

leadership::leadership() noexcept = default;

leadership::leadership(detail::election_target target, lock_handle lock)
    : service_(std::move(target.service)),
      board_(std::move(target.board)),
      lock_(std::move(lock)),
      value_(std::move(target.value)) {}

leadership::leadership(leadership&& other) noexcept = default;

leadership& leadership::operator=(leadership&& other) noexcept {
  if (this != &other) {
    resign_reporting_errors();
    service_ = std::move(other.service_);
    board_ = std::move(other.board_);
    lock_ = std::move(other.lock_);
    value_ = std::move(other.value_);
  }
  return *this;
}

leadership::~leadership() { resign_reporting_errors(); }

void leadership::proclaim(std::string value) {
  if (!lock_) throw std::logic_error("dlock: proclaim on an empty leadership");
  if (lock_.lost()) {
    throw lock_lost_error("dlock: " + service_->describe() + ": the lead of election '" +
                          naming::quote_for_message(lock_.name()) + "' (term " +
                          std::to_string(term()) + ") is lost; proclaim refused");
  }
  board_->proclaim(lock_.name(), *granted_lease(lock_), value);
  value_ = std::move(value);
}

void leadership::resign() {
  if (!lock_) return;
  std::exception_ptr failed;
  // A lost lead may have a newer term on the board, which withdraw leaves alone.
  try {
    board_->withdraw(lock_.name(), *granted_lease(lock_));
  } catch (...) {
    failed = std::current_exception();
  }
  lock_handle lock = std::move(lock_);
  lock.release();  // throws connection_error as lock_handle::release
  if (failed) std::rethrow_exception(failed);
}

void leadership::resign_reporting_errors() noexcept {
  if (!lock_) return;
  try {
    resign();
  } catch (...) {
    service_->report(std::current_exception());
  }
}

}  // namespace dlock
