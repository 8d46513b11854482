// dlock/core/provider.hpp: the provider interfaces a service takes by injection.
//
// A service asks for the narrowest interface it uses (lock_provider, say) and never names a
// backend; main() builds a concrete provider (dlock::file::provider, or make_provider(url))
// and hands it over as std::shared_ptr<dlock::lock_provider>.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/core/distributed_lock.hpp>
#include <dlock/core/distributed_reader_writer_lock.hpp>
#include <dlock/core/distributed_semaphore.hpp>
#include <dlock/core/durations.hpp>
#include <dlock/core/election.hpp>
#include <dlock/core/errors.hpp>
#include <dlock/core/health.hpp>
#include <dlock/core/inspection.hpp>
#include <dlock/core/metrics_sink.hpp>

namespace dlock {

class backend;

/// Counters of one provider since its creation, for a service's metrics system. Counting
/// is a relaxed atomic increment, cheap enough to leave on.
struct provider_metrics {
  std::uint64_t acquired = 0;            ///< grants
  std::uint64_t waits = 0;               ///< acquires that found the lock taken and waited
  std::uint64_t not_acquired = 0;        ///< not obtained in time (empty try_acquire, timeout)
  std::uint64_t cancelled = 0;           ///< ended by a stop request
  std::uint64_t failed = 0;              ///< acquires that failed with an error
  std::uint64_t lost = 0;                ///< handles that were lost when they were released
  std::uint64_t release_errors = 0;      ///< releases the backend could not confirm
  std::uint64_t extension_failures = 0;  ///< lease extensions that failed (leased backends)
  std::uint64_t background_errors = 0;   ///< errors handed to the error hook
};

/// Creates exclusive locks by name.
class lock_provider {
 public:
  virtual ~lock_provider() = default;
  /// Returns the lock named `name` (cheap: nothing is sent to the backend).
  /// Throws: std::invalid_argument for an empty name, more than 1024 bytes, or invalid UTF-8.
  virtual distributed_lock create_lock(std::string_view name) = 0;
};

/// Creates reader-writer locks by name.
class reader_writer_lock_provider {
 public:
  virtual ~reader_writer_lock_provider() = default;
  /// As lock_provider::create_lock.
  virtual distributed_reader_writer_lock create_reader_writer_lock(std::string_view name) = 0;
};

/// Creates semaphores by name.
class semaphore_provider {
 public:
  virtual ~semaphore_provider() = default;
  /// As lock_provider::create_lock; also throws std::invalid_argument when max_count is 0.
  /// Requires: every user of `name` passes the same max_count.
  virtual distributed_semaphore create_semaphore(std::string_view name,
                                                 std::uint32_t max_count) = 0;
};

/// All three, over one backend. Every backend's provider derives from it, and
/// std::shared_ptr<provider> converts to a shared_ptr of each interface.
///
/// Thread safety: every member may be called concurrently. Lifetime: locks and handles keep
/// the provider's internals alive, so destroying the provider first is safe; its background
/// work (monitors, connections) ends when the last of them is gone.
class provider : public lock_provider,
                 public reader_writer_lock_provider,
                 public semaphore_provider,
                 public election_provider {
 public:
  distributed_lock create_lock(std::string_view name) override;
  distributed_reader_writer_lock create_reader_writer_lock(std::string_view name) override;
  distributed_semaphore create_semaphore(std::string_view name,
                                         std::uint32_t max_count) override;
  election create_election(std::string_view name) override;

  /// Sets the maximum hold time of every lock this provider creates from now on (zero, the
  /// default: none); a lock's with_max_hold() overrides it. URL option: `max_hold=10m`.
  /// Throws std::invalid_argument if negative.
  void set_default_max_hold(std::chrono::nanoseconds limit);

  /// Sets the minimum hold of every exclusive lock this provider creates from now on (zero,
  /// the default: none); a lock's with_min_hold() overrides it. URL option: `min_hold=5m`.
  /// Throws std::invalid_argument if negative, or where the backend cannot keep it.
  void set_default_min_hold(std::chrono::nanoseconds min_hold);

  /// The provider's counters so far. Thread-safe.
  provider_metrics metrics() const noexcept;

  /// Whether the provider can keep what it holds: its connections and sessions are up and no
  /// lease is overdue for extension (dlock/core/health.hpp). Cheap: it reports what the
  /// backend's monitors last found, so a liveness probe may call it every second. How soon a
  /// problem shows is each backend's lost bound (docs/<backend>.md). Thread-safe.
  provider_health health() const;

  /// Sends every event from now on to `sink` as well (null: none, the default): acquires with
  /// their outcome and wait, releases with their hold time, losses when they happen, lease
  /// extensions that failed, reconnections. dlock::prometheus_metrics is a ready sink.
  /// Thread-safe. A grant's loss and release go to the sink that saw the grant.
  void set_metrics_sink(std::shared_ptr<metrics_sink> sink);

  /// Stamps `owner` on every grant from now on whose lock names none (with_owner()); the
  /// default is default_owner(), "<host> pid <pid> <program>". URL option: `owner=...`.
  /// Throws std::invalid_argument for more than 256 bytes or a control character.
  void set_owner(std::string owner);
  std::string owner() const;

  /// Who holds `name` (its lock or reader-writer lock, its semaphore) and who waits, as far as
  /// the backend can see (docs/observability.md, "The inspector"). Throws std::invalid_argument
  /// for an invalid name, unsupported_operation where the backend cannot look,
  /// connection_error when its server cannot be asked.
  lock_inspection inspect(std::string_view name) const;

  /// inspect() of every name that begins with `prefix` (empty: all) and is held or waited
  /// for, held longest first (where the backend knows no start, as etcd: in the backend's
  /// order of age, after the names it does know). Throws as inspect(), and
  /// unsupported_operation where the backend cannot list names.
  std::vector<lock_inspection> list_locks(std::string_view prefix = {}) const;

  /// For an administrator: frees `name` (its lock or reader-writer lock, semaphore slots and
  /// upgrade gate) behind its holders' backs and fences them out: the next grant's token is
  /// higher than theirs, and their handles are lost where the backend can tell them
  /// (docs/observability.md, "Breaking a lock"). Throws as inspect().
  void break_lock(std::string_view name);

  /// The backend's name ("file", "redis", ...) and where it is (never a password).
  std::string_view scheme() const noexcept;
  std::string endpoint() const;
  /// The executor that runs timers, monitors and, by default, async completion handlers.
  boost::asio::any_io_executor get_executor() const;

 protected:
  /// For backend providers: takes `backend` over and starts it (backend::start()).
  /// `on_error` empty means the default (one line to stderr).
  provider(std::shared_ptr<backend> backend, error_handler on_error);

 private:
  friend std::shared_ptr<election_board> election_board_of(const provider& p);
  friend std::optional<std::chrono::nanoseconds> check_held_by_caller(provider& p);
  friend void check_held_locks(provider& p);
  std::shared_ptr<detail::lock_service> service_;
};

}  // namespace dlock
