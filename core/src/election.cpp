// Campaigns and leader reads: an election's lock taken as any acquire, then the record.
#include <dlock/core/election.hpp>

#include <unistd.h>

#include <climits>
#include <stdexcept>

#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/provider.hpp>

#include "acquire_op.hpp"
#include "election_access.hpp"
#include "lock_service.hpp"

namespace dlock {

namespace detail {

namespace {

lock_target lock_of(const election_target& target) {
  // No maximum hold: a leader leads until it resigns or loses the lock.
  return lock_target{target.service, resource_kind::election, target.name, 1,
                     std::chrono::nanoseconds::zero()};
}

// The grant becomes a lead once its value is on the board; a grant whose proclaim fails is
// let go again (the handle's destructor), so a failed campaign leaves nothing behind.
leadership lead_with(const election_target& target, std::string value, lock_handle lock) {
  target.board->proclaim(target.name, *granted_lease(lock), value);
  election_target led = target;
  led.value = std::move(value);
  return election_access::make(std::move(led), std::move(lock));
}

}  // namespace

std::string default_candidate_value() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "localhost") + ":" + std::to_string(::getpid());
}

void check_timeout(const election_target& target, std::chrono::nanoseconds timeout) {
  check_timeout(lock_of(target), timeout);
}

boost::asio::any_io_executor executor_of(const election_target& target) {
  return target.service->backend().executor();
}

void start_campaign(const election_target& target, std::string value,
                    std::chrono::nanoseconds timeout, std::stop_token stop, bool fail_with_error,
                    unique_function<campaign_signature> done) {
  // An init-capture: a plain [target] copies `const election_target`, which std::move below
  // would copy again, leaving the provider referenced here.
  auto lead = [target = target, value = std::move(value), done = std::move(done)](
                  std::exception_ptr error, std::optional<lock_handle> lock) mutable {
    // As acquire_op::finish: no reference of ours to the provider outlives the result, so
    // the caller, not this thread, shuts the provider down.
    election_target own = std::move(target);
    std::optional<leadership> led;
    if (!error && lock) {
      try {
        led.emplace(lead_with(own, std::move(value), std::move(*lock)));
      } catch (...) {
        error = std::current_exception();
      }
    }
    own = {};
    lock.reset();
    done(std::move(error), std::move(led));
  };
  // The proclaim may wait for the thread the acquire completes on (a RedLock board's fan-out).
  start_chained_acquire(lock_of(target), lock_mode::exclusive, timeout, std::move(stop),
                        fail_with_error, std::move(lead));
}

}  // namespace detail

std::optional<leadership> election::campaign_blocking(std::string value,
                                                      std::chrono::nanoseconds timeout,
                                                      std::stop_token stop,
                                                      bool fail_with_error) const {
  std::optional<lock_handle> lock = detail::acquire_blocking(
      detail::lock_of(target_), lock_mode::exclusive, timeout, std::move(stop), fail_with_error);
  if (!lock) return std::nullopt;
  return detail::lead_with(target_, std::move(value), std::move(*lock));
}

std::optional<leader_info> election::leader() const { return target_.board->leader(target_.name); }

election provider::create_election(std::string_view name) {
  naming::validate_name(name);
  std::shared_ptr<election_board> board = service_->backend().elections();
  if (!board) {
    throw error("dlock: " + service_->describe() + ": this backend has no leader elections" +
                " (election '" + naming::quote_for_message(name) + "')");
  }
  return election(detail::election_target{service_, std::move(board), std::string(name),
                                          detail::default_candidate_value()});
}

std::shared_ptr<election_board> election_board_of(const provider& p) {
  return p.service_->backend().elections();
}

}  // namespace dlock
