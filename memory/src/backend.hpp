// Private to dlock::memory: the backend over a process-wide table of lock states.
#pragma once

#include <cstdint>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/lease.hpp>

namespace dlock::memory::detail {

class memory_acquire;
class memory_lease;

/// The locks of one domain: what a server would hold for all its clients.
class memory_domain : public std::enable_shared_from_this<memory_domain> {
 public:
  explicit memory_domain(std::string name) : name_(std::move(name)) {}

  /// The domain named `name`, created on first use and kept for the life of the process, so
  /// fencing tokens keep rising however often providers come and go.
  static std::shared_ptr<memory_domain> named(const std::string& name);

  const std::string& name() const noexcept { return name_; }

  /// One attempt now; never overtakes queued waiters. nullptr when not grantable.
  std::unique_ptr<lease> try_now(const acquire_request& request);
  /// Grants, fails or queues `op` (returns true when queued); its completion is posted.
  bool start(const std::shared_ptr<memory_acquire>& op);
  /// Free slots of the semaphore `request` names. Throws on a max_count mismatch.
  std::uint32_t current_count(const acquire_request& request);
  /// Removes a queued `op` and completes it with no lease; no-op once it has completed.
  void withdraw(memory_acquire* op);
  void release(memory_lease* lease);
  void break_name(const std::string& name);
  lock_inspection inspect(const std::string& name);
  std::vector<lock_inspection> list(const std::string& prefix);

  // Elections (election_board.cpp): each leader's record beside its election lock ("E" key),
  // under the same mutex, so a record is read only while its term holds that lock.
  void proclaim(const std::string& election, const lease& leadership, std::string_view value);
  void withdraw(const std::string& election, const lease& leadership);
  std::optional<leader_info> leader(const std::string& election);
  std::shared_ptr<void> watch(const std::string& election, std::function<void()> changed);

 private:
  struct resource {
    bool writer = false;
    std::uint32_t readers = 0;
    std::uint32_t slots = 0;
    std::uint32_t max_count = 0;  // semaphores: the count every user must pass
    std::list<std::shared_ptr<memory_acquire>> queue;  // not a deque: an empty one allocates
    std::vector<memory_lease*> holders;
    /// Until when the last grant's minimum hold keeps the name (acquire_request::min_hold).
    std::chrono::steady_clock::time_point held_until{};
    bool idle() const {
      return !writer && readers == 0 && slots == 0 && queue.empty() &&
             held_until <= std::chrono::steady_clock::now();
    }
  };
  struct completion {
    std::shared_ptr<memory_acquire> op;
    std::exception_ptr error;
    std::unique_ptr<lease> granted;
  };

  static std::string key_of(const acquire_request& request);
  void describe(const resource& r, lock_inspection& into) const;
  void check_max_count(resource& r, const acquire_request& request) const;
  static bool grantable(const resource& r, const acquire_request& request);
  void wake_after_hold(const std::string& key, resource& r);
  void serve(const std::string& key);
  std::unique_ptr<lease> grant(const std::string& key, resource& r,
                               const acquire_request& request);
  void serve_queue(const std::string& key, resource& r, std::vector<completion>& done);
  void forget_if_idle(std::map<std::string, resource>::iterator it);
  static void complete(std::vector<completion>& done);

  std::string name_;
  std::mutex mutex_;
  std::uint64_t last_token_ = 0;
  std::map<std::string, resource> resources_;

  struct election_watcher;
  bool leads(const std::string& election, const lease& leadership) const;
  void forget_record(const memory_lease& released);
  void tell_watchers(const std::string& election);
  std::map<std::string, leader_info> records_;
  std::multimap<std::string, std::weak_ptr<election_watcher>> watchers_;
};

class memory_backend final : public dlock::backend, public inline_acquirer {
 public:
  explicit memory_backend(const std::string& domain);
  ~memory_backend() override;

  std::string_view scheme() const noexcept override { return "memory"; }
  std::string min_hold_refusal() const override { return {}; }
  std::string endpoint() const override;
  inline_acquirer* as_inline_acquirer() noexcept override { return this; }
  bool acquires_inline_locally() const noexcept override { return true; }
  std::optional<std::uint32_t> current_count(const acquire_request& request) override {
    return domain_->current_count(request);
  }
  std::unique_ptr<lease> try_acquire_inline(const acquire_request& request) override;
  lock_inspection inspect(const std::string& name) override { return domain_->inspect(name); }
  std::vector<lock_inspection> list_locks(const std::string& prefix) override {
    return domain_->list(prefix);
  }
  void break_lock(const std::string& name) override { domain_->break_name(name); }
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;

  std::shared_ptr<election_board> elections() override;

  memory_domain& domain() noexcept { return *domain_; }

 private:
  std::shared_ptr<memory_domain> domain_;
};

}  // namespace dlock::memory::detail
