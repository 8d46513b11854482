// dlock/core/election.hpp: leader election by name: dlock::election, the leadership handle
// and leader observations.
//
// Start with dlock::election (made by provider::create_election). Leading is holding the
// exclusive lock of the election, kept apart from every lock of the same name, so a
// leadership is a lock_handle with a record beside it: its term is the lock's fencing token
// and its loss is the lock's loss, on every backend alike. docs/election.md has an example
// service and each backend's layout and bounds.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include <dlock/core/detail/acquire.hpp>
#include <dlock/core/durations.hpp>
#include <dlock/core/lock_handle.hpp>

namespace dlock {

class election_board;

/// Who leads an election: the value the leader proclaimed and its term.
struct leader_info {
  std::string value;
  std::uint64_t term = 0;
  friend bool operator==(const leader_info&, const leader_info&) = default;
};

namespace detail {
class lock_service;
struct election_access;

struct election_target {
  std::shared_ptr<lock_service> service;
  std::shared_ptr<election_board> board;
  std::string name;
  std::string value;
};
}  // namespace detail

/// The lead of one election, held: a move-only RAII value like lock_handle (destruction
/// resigns).
///
/// Guarantees: while `!lost()`, no other candidate leads this election, and the term is
/// higher than every earlier leader's, on every backend, so it serves as a fencing token
/// (docs/fencing.md). The lead is lost exactly when the election's lock is lost (the same
/// monitors and bounds as lock_handle::lost); proclaim() then fails, and the next leader's
/// term is higher. resign() (or destruction) removes the record first and then lets the lock
/// go, so the next candidate is let in at once and observers see nobody between the two.
///
/// Thread safety: distinct objects: safe. Shared: only the const observers (lost(),
/// lost_token(), term(), value()). Lifetime: a leadership keeps its provider's internals
/// alive; the provider may be destroyed first.
///
///   dlock::leadership lead = provider->create_election("scheduler").campaign();
///   run_scheduler(lead.term(), lead.lost_token());   // stop when the lead is lost
///   // resigned here
class [[nodiscard]] leadership {
 public:
  leadership() noexcept;
  leadership(leadership&& other) noexcept;
  leadership& operator=(leadership&& other) noexcept;
  leadership(const leadership&) = delete;
  leadership& operator=(const leadership&) = delete;
  /// Resigns; errors go to the provider's error hook. Blocks as lock_handle's destructor.
  ~leadership();

  /// True unless empty (default-constructed, moved from, resigned).
  explicit operator bool() const noexcept { return static_cast<bool>(lock_); }

  /// True once the lead cannot be guaranteed any more, and on an empty handle.
  bool lost() const noexcept { return lock_.lost(); }
  /// Stopped when the lead is lost (already stopped on an empty handle).
  std::stop_token lost_token() const noexcept { return lock_.lost_token(); }
  /// Runs `callback` on the provider's executor when the lead is lost (at once if it is).
  void on_lost(std::function<void()> callback) { lock_.on_lost(std::move(callback)); }

  /// This leader's term: higher than every earlier leader's. Requires a non-empty handle.
  std::uint64_t term() const noexcept { return lock_.fencing_token(); }
  /// The value this leader last proclaimed.
  const std::string& value() const noexcept { return value_; }
  /// The election's name.
  const std::string& election() const noexcept { return lock_.name(); }

  /// Replaces the leader's recorded value, only while this term still leads. Throws
  /// lock_lost_error when it does not (lost, or a newer term recorded), connection_error
  /// when the backend cannot be reached, std::logic_error on an empty handle.
  void proclaim(std::string value);

  /// Ends the lead: removes the record, then releases the election's lock. Idempotent.
  /// Throws connection_error when the backend could not be told (the lead is given up
  /// locally anyway, and the backend ends it by its own means, as a lock's release).
  void resign();

 private:
  friend struct detail::election_access;
  leadership(detail::election_target target, lock_handle lock);
  void resign_reporting_errors() noexcept;

  std::shared_ptr<detail::lock_service> service_;
  std::shared_ptr<election_board> board_;
  lock_handle lock_;
  std::string value_;
};

/// A running observation of an election's leader (election::observe); destruction stops it.
/// Move-only. After the destructor returns the callback is not running and never runs again
/// (unless the destructor runs inside the callback, which it may: it then returns at once).
class [[nodiscard]] leader_observation {
 public:
  leader_observation() noexcept;
  leader_observation(leader_observation&&) noexcept;
  leader_observation& operator=(leader_observation&&) noexcept;
  ~leader_observation();

  /// Stops the observation now; idempotent.
  void stop() noexcept;

  struct state;

 private:
  friend struct detail::election_access;
  explicit leader_observation(std::shared_ptr<state> s) noexcept;
  std::shared_ptr<state> state_;
};

namespace detail {
using campaign_signature = void(std::exception_ptr, std::optional<leadership>);
using campaign_throwing_signature = void(std::exception_ptr, leadership);

/// Starts a campaign: the election's lock as an acquire of its own, then the record.
void start_campaign(const election_target& target, std::string value,
                    std::chrono::nanoseconds timeout, std::stop_token stop,
                    bool fail_with_error, unique_function<campaign_signature> done);
boost::asio::any_io_executor executor_of(const election_target& target);
void check_timeout(const election_target& target, std::chrono::nanoseconds timeout);

template <bool Throwing>
struct initiate_campaign {
  election_target target;
  template <typename Handler>
  void operator()(Handler&& handler, std::string value, std::chrono::nanoseconds timeout,
                  std::stop_token stop) const {
    start_campaign(target, std::move(value), timeout, std::move(stop), Throwing,
                   completion_posting_to<Throwing, leadership>(std::forward<Handler>(handler),
                                                               executor_of(target)));
  }
};
}  // namespace detail

/// Leader election by name: among the candidates that campaign, one at a time leads.
///
/// A candidate campaigns with a value (by default "host:pid"), waits like an acquire of a
/// lock (the same timeouts, stop tokens, errors and async forms as distributed_lock), and gets
/// a leadership. Anyone may ask leader() or observe() the leader without campaigning. Fairness
/// and bounds are the election lock's (docs/semantics.md); not reentrant: a second campaign
/// from the same process waits like any other candidate.
///
/// Thread safety: an election is a cheap value; distinct objects safe, shared const safe.
///
///   dlock::election e = provider->create_election("scheduler");
///   if (auto lead = e.try_campaign(5s)) run_scheduler(lead->term(), lead->lost_token());
///   std::optional<dlock::leader_info> who = e.leader();
class election {
 public:
  /// A copy that campaigns with `value` instead of "host:pid".
  [[nodiscard]] election with_value(std::string value) const {
    election copy = *this;
    copy.target_.value = std::move(value);
    return copy;
  }

  /// Campaigns until leading, `timeout` or `stop`. Returns nothing when not elected in time
  /// (a zero timeout makes one attempt). Throws as distributed_lock::try_acquire.
  [[nodiscard]] std::optional<leadership> try_campaign(std::chrono::nanoseconds timeout = {},
                                                       std::stop_token stop = {}) const {
    return campaign_blocking(target_.value, timeout, std::move(stop), false);
  }
  [[nodiscard]] std::optional<leadership> try_campaign(std::string value,
                                                       std::chrono::nanoseconds timeout = {},
                                                       std::stop_token stop = {}) const {
    return campaign_blocking(std::move(value), timeout, std::move(stop), false);
  }

  /// Campaigns until leading. Throws timeout_error, cancelled_error, connection_error as
  /// distributed_lock::acquire.
  [[nodiscard]] leadership campaign(std::chrono::nanoseconds timeout = forever,
                                    std::stop_token stop = {}) const {
    return std::move(*campaign_blocking(target_.value, timeout, std::move(stop), true));
  }
  [[nodiscard]] leadership campaign(std::string value,
                                    std::chrono::nanoseconds timeout = forever,
                                    std::stop_token stop = {}) const {
    return std::move(*campaign_blocking(std::move(value), timeout, std::move(stop), true));
  }

  /// Async try_campaign. Completion signature: void(std::exception_ptr,
  /// std::optional<leadership>). Cancellation: `stop`. Like async_try_acquire, the handler
  /// runs on its associated executor (by default the provider's), never inside this call.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::campaign_signature) CompletionToken>
  auto async_try_campaign(std::chrono::nanoseconds timeout, std::stop_token stop,
                          CompletionToken&& token) const {
    detail::check_timeout(target_, timeout);
    return boost::asio::async_initiate<CompletionToken, detail::campaign_signature>(
        detail::initiate_campaign<false>{target_}, token, target_.value, timeout,
        std::move(stop));
  }

  /// Async campaign. Completion signature: void(std::exception_ptr, leadership), with
  /// timeout_error / cancelled_error as campaign().
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::campaign_throwing_signature)
                CompletionToken>
  auto async_campaign(std::chrono::nanoseconds timeout, std::stop_token stop,
                      CompletionToken&& token) const {
    detail::check_timeout(target_, timeout);
    return boost::asio::async_initiate<CompletionToken, detail::campaign_throwing_signature>(
        detail::initiate_campaign<true>{target_}, token, target_.value, timeout,
        std::move(stop));
  }

  /// Who leads now: nothing when nobody does (or the new leader has not recorded its value
  /// yet). Never a leader whose lead is over by the backend's bounds. Throws
  /// connection_error. Blocks for one read at the backend.
  std::optional<leader_info> leader() const;

  /// Calls `on_change` with the leader as observe() starts, then after every change, in
  /// order (terms never go back), from one thread of the observation's own, one call at a
  /// time. Changes closer together than a read of the backend may be seen as one (the
  /// latest): a leader that stays until it was observed is always observed. Pushed by the
  /// backend where it can, else read every poll period (docs/election.md); errors reading
  /// the backend go to the provider's error hook and the observation goes on.
  leader_observation observe(
      std::function<void(const std::optional<leader_info>&)> on_change) const;

  const std::string& name() const noexcept { return target_.name; }
  /// The value a campaign without one records.
  const std::string& value() const noexcept { return target_.value; }

 private:
  friend class provider;
  explicit election(detail::election_target target) : target_(std::move(target)) {}
  std::optional<leadership> campaign_blocking(std::string value,
                                              std::chrono::nanoseconds timeout,
                                              std::stop_token stop, bool fail_with_error) const;
  detail::election_target target_;
};

/// Makes elections by name; dlock::provider is one.
class election_provider {
 public:
  virtual ~election_provider() = default;
  /// An election named `name` (any valid lock name; kept apart from the lock of that name).
  /// Throws std::invalid_argument for a bad name, dlock::error when the backend has no
  /// elections.
  virtual election create_election(std::string_view name) = 0;
};

}  // namespace dlock
