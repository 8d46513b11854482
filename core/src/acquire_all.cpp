// acquire_all: sort into the canonical order, take one lock after another within one
// deadline, and on any failure release what was taken (in reverse) before reporting.
#include <dlock/core/acquire_all.hpp>

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>
#include <tuple>

#include <dlock/core/errors.hpp>
#include <dlock/core/backend/naming.hpp>

#include "acquire_op.hpp"
#include "lock_service.hpp"
#include "shared_deadline.hpp"

namespace dlock {

namespace detail {

struct lock_set_access {
  static const lock_target& target(const lock_request& r) { return r.target_; }
  static lock_mode mode(const lock_request& r) { return r.mode_; }
  static lock_set make(std::size_t count, std::vector<lock_handle> taken,
                       const std::vector<std::size_t>& order);
};

}  // namespace detail

struct lock_set::state {
  std::vector<lock_handle> handles;  // in the caller's order
  std::vector<std::size_t> taken;    // indices into handles, in the order they were taken
  std::stop_source any_lost;
  std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> watches;
};

lock_request::lock_request(const distributed_lock& lock)
    : lock_request(lock.target_, lock_mode::exclusive) {}

lock_request::lock_request(const distributed_semaphore& semaphore)
    : lock_request(semaphore.target_, lock_mode::exclusive) {}

lock_request lock_request::read(const distributed_reader_writer_lock& lock) {
  return lock_request(lock.target_, lock_mode::shared);
}

lock_request lock_request::write(const distributed_reader_writer_lock& lock) {
  return lock_request(lock.target_, lock_mode::exclusive);
}

lock_set::lock_set() noexcept = default;
lock_set::lock_set(std::unique_ptr<state> held) noexcept : state_(std::move(held)) {}
lock_set::lock_set(lock_set&& other) noexcept = default;

lock_set& lock_set::operator=(lock_set&& other) noexcept {
  if (this != &other) {
    try {
      release();
    } catch (...) {
      // Each handle has reported its own failure to its provider's hook.
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

lock_set::~lock_set() {
  try {
    release();
  } catch (...) {
    // As above: the hooks have it.
  }
}

std::size_t lock_set::size() const noexcept { return state_ ? state_->handles.size() : 0; }

const lock_handle& lock_set::operator[](std::size_t index) const {
  if (!state_) throw std::out_of_range("dlock: index into an empty lock_set");
  return state_->handles.at(index);
}

std::uint64_t lock_set::fencing_token(std::size_t index) const { return (*this)[index].fencing_token(); }

void lock_set::release() {
  if (!state_) return;
  auto held = std::move(state_);
  held->watches.clear();
  std::exception_ptr first_error;
  for (auto it = held->taken.rbegin(); it != held->taken.rend(); ++it) {
    try {
      held->handles[*it].release();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

bool lock_set::lost() const noexcept {
  if (!state_ || state_->any_lost.stop_requested()) return true;
  // A grant whose validity ran out is lost by the clock before its token is stopped.
  return std::any_of(state_->handles.begin(), state_->handles.end(),
                     [](const lock_handle& handle) { return handle.lost(); });
}

std::stop_token lock_set::lost_token() const noexcept {
  return state_ ? state_->any_lost.get_token() : lock_handle{}.lost_token();  // stopped
}

namespace detail {

namespace {

/// The order every process takes a list in: by backend and endpoint, then locks before
/// semaphores, then name, then primitive. A lock and the reader-writer lock of one name sit
/// side by side (they are one resource on some backends), so no two lists can take them in
/// opposite orders. Throws std::invalid_argument for an empty list or a lock listed twice (it
/// would wait for itself: locks are not reentrant).
std::vector<std::size_t> canonical_order(const std::vector<lock_request>& locks) {
  if (locks.empty()) throw std::invalid_argument("dlock: acquire_all needs at least one lock");
  using key = std::tuple<std::string, bool, std::string, int>;
  std::vector<key> keys;
  for (const auto& request : locks) {
    const lock_target& target = lock_set_access::target(request);
    keys.emplace_back(target.service->describe(), target.kind == resource_kind::semaphore,
                      target.name, static_cast<int>(target.kind));
  }
  std::vector<std::size_t> order(locks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (keys[order[i]] == keys[order[i - 1]]) {
      throw std::invalid_argument("dlock: acquire_all lists '" +
                                  naming::quote_for_message(locks[order[i]].name()) +
                                  "' twice; a lock cannot be taken twice");
    }
  }
  return order;
}

/// Releases in the reverse of the order taken; errors go to each provider's hook.
void release_in_reverse(std::vector<lock_handle>& taken) noexcept {
  while (!taken.empty()) taken.pop_back();
}

/// The async chain: one start_acquire after another, each from the previous completion.
class acquire_all_op : public std::enable_shared_from_this<acquire_all_op> {
 public:
  acquire_all_op(std::vector<lock_request> locks, std::vector<std::size_t> order,
                 std::chrono::nanoseconds timeout, std::stop_token stop, bool fail_with_error,
                 acquire_all_completion done)
      : locks_(std::move(locks)),
        order_(std::move(order)),
        deadline_(timeout),
        stop_(std::move(stop)),
        fail_with_error_(fail_with_error),
        done_(std::move(done)) {}

  void next() {
    if (taken_.size() == order_.size()) {
      auto done = std::move(done_);
      done(nullptr, lock_set_access::make(locks_.size(), std::move(taken_), order_));
      return;
    }
    const lock_request& request = locks_[order_[taken_.size()]];
    start_chained_acquire(lock_set_access::target(request), lock_set_access::mode(request),
                          deadline_.remaining(), stop_, fail_with_error_,
                          [self = shared_from_this()](std::exception_ptr error,
                                                      std::optional<lock_handle> handle) {
                            if (error || !handle) {
                              release_in_reverse(self->taken_);
                              auto done = std::move(self->done_);
                              done(std::move(error), std::nullopt);
                              return;
                            }
                            self->taken_.push_back(std::move(*handle));
                            self->next();
                          });
  }

 private:
  std::vector<lock_request> locks_;
  std::vector<std::size_t> order_;
  shared_deadline deadline_;
  std::stop_token stop_;
  bool fail_with_error_;
  acquire_all_completion done_;
  std::vector<lock_handle> taken_;
};

}  // namespace

boost::asio::any_io_executor executor_of(const std::vector<lock_request>& locks) {
  if (locks.empty()) throw std::invalid_argument("dlock: acquire_all needs at least one lock");
  return executor_of(lock_set_access::target(locks.front()));
}

void check_acquire_all(const std::vector<lock_request>& locks,
                       std::chrono::nanoseconds timeout) {
  (void)canonical_order(locks);
  (void)shared_deadline(timeout);
}

void start_acquire_all(std::vector<lock_request> locks, std::chrono::nanoseconds timeout,
                       std::stop_token stop, bool fail_with_error, acquire_all_completion done) {
  auto order = canonical_order(locks);
  std::make_shared<acquire_all_op>(std::move(locks), std::move(order), timeout, std::move(stop),
                                   fail_with_error, std::move(done))
      ->next();
}

std::optional<lock_set> acquire_all_blocking(std::vector<lock_request> locks,
                                             std::chrono::nanoseconds timeout,
                                             std::stop_token stop, bool fail_with_error) {
  const auto order = canonical_order(locks);
  const shared_deadline deadline(timeout);
  std::vector<lock_handle> taken;
  try {
    for (std::size_t index : order) {
      const lock_request& request = locks[index];
      auto handle = acquire_blocking(lock_set_access::target(request),
                                     lock_set_access::mode(request), deadline.remaining(), stop,
                                     fail_with_error);
      if (!handle) {
        release_in_reverse(taken);
        return std::nullopt;
      }
      taken.push_back(std::move(*handle));
    }
  } catch (...) {
    release_in_reverse(taken);
    throw;
  }
  return lock_set_access::make(locks.size(), std::move(taken), order);
}

// Entries go back to the caller's order; each lock's loss stops the set's token.
lock_set lock_set_access::make(std::size_t count, std::vector<lock_handle> taken,
                               const std::vector<std::size_t>& order) {
  auto held = std::make_unique<lock_set::state>();
  held->handles.resize(count);
  for (std::size_t i = 0; i < taken.size(); ++i) {
    held->handles[order[i]] = std::move(taken[i]);
    held->taken.push_back(order[i]);
  }
  for (const auto& handle : held->handles) {
    held->watches.push_back(std::make_unique<std::stop_callback<std::function<void()>>>(
        handle.lost_token(), std::function<void()>([any = held->any_lost]() mutable {
          any.request_stop();
        })));
  }
  return lock_set(std::move(held));
}

}  // namespace detail

}  // namespace dlock
