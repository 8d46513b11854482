// The contract suite against dlock::memory, in a domain of its own.
#include <stdexcept>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "support.hpp"

namespace contract {

namespace {

class memory_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "memory"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::memory::provider>(dlock::memory::options{.domain = domain_});
  }

  std::string url() const override { return "memory:///" + domain_; }

  // A release unlocks on the caller's thread: it never waits for another.
  std::shared_ptr<dlock::provider> make_provider_with_release_timeout(
      std::chrono::milliseconds) override {
    return make_provider();
  }

  void break_lock(const std::string& name) override {
    dlock::memory::provider(dlock::memory::options{.domain = domain_}).break_lock(name);  // dlock::provider's
  }

  // The memory backend breaks every primitive of a name at once, the election's lock too.
  void break_election(const std::string& name) override { break_lock(name); }

  // The external cases (other processes, unreachable endpoints) are not linked here.
  void acquire_from_unreachable_endpoint() override {
    throw std::logic_error("a memory backend has no endpoint to be unreachable");
  }
  std::string unreachable_endpoint() const override { return {}; }

  // A domain's state is private to the backend: nothing outside it can look.
  std::optional<std::vector<std::string>> server_footprint(const std::string&) override {
    return std::nullopt;
  }
  bool footprint_shows_waiters(dlock::primitive) const override { return false; }
  bool keeps_min_hold() const override { return true; }
  bool pushes_leader_changes() const override { return true; }

 private:
  std::string domain_ = support::unique_name("contract");
};

}  // namespace

backend_fixture& backend() {
  static memory_fixture fixture;
  return fixture;
}

}  // namespace contract
