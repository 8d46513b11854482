// The memory backend's election board: records beside the election locks in the domain's
// table, and watchers told in-process on every change (nothing to poll).
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"

namespace dlock::memory::detail {

// One observer's callback; `open` guards it so that after the watch is dropped it never runs.
struct memory_domain::election_watcher {
  std::mutex mutex;
  bool open = true;
  std::function<void()> changed;
};

void memory_domain::proclaim(const std::string& election, const lease& leadership,
                             std::string_view value) {
  {
    std::lock_guard lock(mutex_);
    if (leadership.lost() || !leads(election, leadership)) {
      throw lock_lost_error("dlock: memory " + name_ + ": election '" +
                            naming::quote_for_message(election) + "' is no longer led by term " +
                            std::to_string(leadership.fencing_token()));
    }
    records_[election] = leader_info{std::string(value), leadership.fencing_token()};
  }
  tell_watchers(election);
}

void memory_domain::withdraw(const std::string& election, const lease& leadership) {
  {
    std::lock_guard lock(mutex_);
    auto it = records_.find(election);
    if (it == records_.end() || it->second.term != leadership.fencing_token()) return;
    records_.erase(it);
  }
  tell_watchers(election);
}

std::optional<leader_info> memory_domain::leader(const std::string& election) {
  std::lock_guard lock(mutex_);
  auto it = records_.find(election);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<void> memory_domain::watch(const std::string& election,
                                           std::function<void()> changed) {
  auto watcher = std::make_shared<election_watcher>();
  watcher->changed = std::move(changed);
  {
    std::lock_guard lock(mutex_);
    std::erase_if(watchers_, [](const auto& entry) { return entry.second.expired(); });
    watchers_.emplace(election, watcher);
  }
  // Dropping the watch closes it: a call already running finishes first.
  return std::shared_ptr<void>(new int(0), [watcher](int* token) {
    delete token;
    std::lock_guard lock(watcher->mutex);
    watcher->open = false;
  });
}

void memory_domain::tell_watchers(const std::string& election) {
  std::vector<std::shared_ptr<election_watcher>> told;
  {
    std::lock_guard lock(mutex_);
    auto [first, last] = watchers_.equal_range(election);
    for (auto it = first; it != last; ++it) {
      if (auto watcher = it->second.lock()) told.push_back(std::move(watcher));
    }
  }
  for (const auto& watcher : told) {
    std::lock_guard lock(watcher->mutex);
    if (watcher->open) watcher->changed();
  }
}

namespace {

class memory_election_board final : public election_board {
 public:
  explicit memory_election_board(std::shared_ptr<memory_domain> domain)
      : domain_(std::move(domain)) {}

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    domain_->proclaim(std::string(election), leadership, value);
  }
  void withdraw(std::string_view election, const lease& leadership) override {
    domain_->withdraw(std::string(election), leadership);
  }
  std::optional<leader_info> leader(std::string_view election) override {
    return domain_->leader(std::string(election));
  }
  std::shared_ptr<void> watch(std::string_view election, std::function<void()> changed) override {
    return domain_->watch(std::string(election), std::move(changed));
  }

 private:
  std::shared_ptr<memory_domain> domain_;
};

}  // namespace

std::shared_ptr<election_board> memory_backend::elections() {
  return std::make_shared<memory_election_board>(domain_);
}

}  // namespace dlock::memory::detail
