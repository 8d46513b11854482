// dlock/core/backend/election.hpp: dlock::election_board, what a backend adds for leader
// election (for backend implementers).
//
// Core builds an election on a lock: leading is holding the exclusive lock of kind
// resource_kind::election under the election's name, the term is that lock's fencing token, and
// losing the lock is losing the lead. All of that is core's, stated once for every backend.
// What a backend adds is the board: the leader's record (a value and its term) that anyone can
// read and only the current term can write, and word of its changes for observers. A backend
// offers a board through backend::election_board(); one without a board has no elections
// (provider::create_election throws). Start with backend.hpp for the rest of the kit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/election.hpp>

namespace dlock {

/// The leader records of one backend's elections.
///
/// Every call names the election (a validated name, as acquire_request::name). Calls come
/// from callers' threads and from core's observer threads, concurrently; proclaim and withdraw
/// may also come from the provider's own thread (an async campaign), so they must not wait
/// for that thread.
class election_board {
 public:
  virtual ~election_board() = default;

  /// Records `value` as the leader's value under the term of `leadership`, the held lease of
  /// the election's lock (its fencing token is the term). Throws lock_lost_error when that
  /// lease no longer leads (lost, or a later term is recorded), connection_error when the
  /// backend cannot be reached; a record is never written for a term that does not lead.
  virtual void proclaim(std::string_view election, const lease& leadership,
                        std::string_view value) = 0;

  /// Removes the record of `leadership`'s term, if it is still the one recorded; called
  /// before the lease is released. Throws connection_error when the backend cannot be told.
  virtual void withdraw(std::string_view election, const lease& leadership) = 0;

  /// The recorded leader of `election`: nothing when nobody holds the election's lock or
  /// its holder has not proclaimed yet. A record whose term no longer holds the lock (its
  /// holder crashed, or was partitioned past its lease) is never returned. Throws
  /// connection_error when the backend cannot be reached.
  virtual std::optional<leader_info> leader(std::string_view election) = 0;

  /// Starts calling `changed` (on any thread, possibly more often than the record changes)
  /// whenever `election`'s leader may have changed, until the returned object is destroyed;
  /// after its destruction `changed` is never called again. The default returns nullptr:
  /// the backend cannot push, and core reads leader() every poll_period() instead.
  virtual std::shared_ptr<void> watch(std::string_view /*election*/,
                                      std::function<void()> /*changed*/) {
    return nullptr;
  }

  /// How often an observer reads leader() again without word of a change. Even a pushing
  /// board is read this often, since a holder that dies may leave nothing to push.
  virtual std::chrono::milliseconds poll_period() const { return std::chrono::milliseconds(100); }
};

/// The `changed` of one election_board::watch, for the backend's threads to call while the
/// watch may end on another: once stop() returns, it is never called again (a call running
/// then finishes first). The callback must not call stop() itself.
///
/// Thread safety: every member from any thread.
class watch_callback {
 public:
  explicit watch_callback(std::function<void()> changed) : changed_(std::move(changed)) {}

  /// Calls `changed` unless stopped.
  void operator()() {
    std::lock_guard lock(mutex_);
    if (changed_) changed_();
  }
  void stop() noexcept {
    std::lock_guard lock(mutex_);
    changed_ = nullptr;
  }

 private:
  std::mutex mutex_;
  std::function<void()> changed_;
};

class provider;
/// The board of `p`'s backend, or nullptr when it has none: for tests of a board's watch
/// (tests/contract/election_push_test.cpp). Users go through dlock::election.
std::shared_ptr<election_board> election_board_of(const provider& p);

}  // namespace dlock
