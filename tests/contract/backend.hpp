// The contract suite's view of a backend: each tests/contract/backends/<name>.cpp defines
// contract::backend() for the backend it links, and the same cases run against all of them.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlock/core.hpp>
#include <dlock/core/lock_kind.hpp>
#include <dlock/dlock.hpp>

namespace contract {

class backend_fixture {
 public:
  virtual ~backend_fixture() = default;

  /// The backend's label: "file", "redis", ...
  virtual std::string label() const = 0;

  /// A new provider over the same backend: a separate client, as another process would be.
  virtual std::shared_ptr<dlock::provider> make_provider() = 0;

  /// A URL for make_provider in helper processes, reaching the same backend.
  virtual std::string url() const = 0;

  /// How a nemesis run's workers (nemesis_test.cpp) reach the backend: url() with the shortest
  /// lease the test servers allow, so that a holder paused past it is deposed within the run,
  /// and that lease; nullopt where a paused holder keeps its grant however long (files).
  struct leased_url {
    std::string url;
    std::optional<std::chrono::milliseconds> lease;
  };
  virtual leased_url nemesis_url() const { return {url(), std::nullopt}; }

  /// A provider whose grants are known valid for a few seconds only, as long as its own
  /// threads renew them (lease.hpp: grant_validity), for the cases of lost_by_clock_test.cpp:
  /// nemesis_url()'s, whose lease is that bound; nullptr where grants carry no such time
  /// (files, memory: no lease).
  std::shared_ptr<dlock::provider> make_short_validity_provider() const {
    const auto leased = nemesis_url();
    return leased.lease ? dlock::make_provider(leased.url) : nullptr;
  }

  /// A new provider whose release() waits at most `timeout` for the backend: url() with the
  /// option release_timeout, which every networked backend has; make_provider() where a release
  /// never waits for another thread (files, memory).
  virtual std::shared_ptr<dlock::provider> make_provider_with_release_timeout(
      std::chrono::milliseconds timeout) {
    const std::string base = url();
    const char separator = base.find('?') == std::string::npos ? '?' : '&';
    return dlock::make_provider(base + separator + "release_timeout=" +
                                std::to_string(timeout.count()) + "ms");
  }

  /// Takes the held lock, or reader-writer lock (read, write or upgradeable read), `name` away
  /// behind its holder's back (removes or replaces the lock file, deletes the keys or nodes,
  /// kills the session), as an operator or a fault would.
  virtual void break_lock(const std::string& name) = 0;

  /// Takes the lead of the election `name` away behind its leader's back, as break_lock does
  /// with a lock (the election's lock is apart from the lock `name`). Only backends with
  /// elections are asked.
  virtual void break_election(const std::string& name) {
    throw std::logic_error("no elections on " + label() + " to break '" + name + "'");
  }

  /// Builds a provider for an endpoint that cannot be reached and uses it for one acquire;
  /// the contract is that this throws dlock::connection_error naming the endpoint.
  virtual void acquire_from_unreachable_endpoint() = 0;

  /// A fragment the message of such a connection_error must contain (the endpoint).
  virtual std::string unreachable_endpoint() const = 0;

  /// What the server holds for `name` now, whichever primitive uses it: one line per grant,
  /// queued request, waiter's node or subscription, as another client sees it (Redis keys,
  /// sorted-set members and subscribed channels; PostgreSQL pg_locks rows granted or waiting;
  /// ZooKeeper child nodes; flock(2) locks on the lock files). Sorted, so two calls compare
  /// equal when nothing changed. Leaves out what outlives every grant by design (fencing
  /// counters, empty parent nodes, the lock files themselves). nullopt where the backend's
  /// state cannot be seen from outside (memory).
  virtual std::optional<std::vector<std::string>> server_footprint(const std::string& name) = 0;

  /// Whether an acquire of `kind` that waits shows in server_footprint while it waits. Where
  /// not (a file waiter only watches the directory, a PostgreSQL semaphore waiter LISTENs),
  /// the cancel cases can check only what is left afterwards.
  virtual bool footprint_shows_waiters(dlock::primitive kind) const = 0;

  /// Whether inspect() shows when each grant was made (etcd keeps no time per key; list_locks
  /// then orders by the backend's own measure of age).
  virtual bool inspect_sees_since() const { return true; }

  /// Whether inspect() shows the owner of every holder and waiter. The file backend stores one
  /// owner record per lock file, written by its exclusive holder: readers show their process.
  virtual bool inspect_sees_every_owner() const { return true; }

  /// Whether the backend, as the test servers run it, keeps a lock's minimum hold (with_min_hold)
  /// rather than refusing it. The minimum-hold cases fail when the provider says otherwise, so
  /// that a server set up without what a hold needs is not taken for a backend that refuses.
  virtual bool keeps_min_hold() const = 0;

  /// Whether the backend's election board pushes word of a change of leader
  /// (election_board::watch; docs/election.md lists the backends that do). A board that
  /// returns a watch is held to it either way; this says one must be returned.
  virtual bool pushes_leader_changes() const { return false; }
};

/// The backend under test in this executable.
backend_fixture& backend();

}  // namespace contract
