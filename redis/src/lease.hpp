// Private to dlock::redis: a grant as the handle owns it.
#pragma once

#include <cstdint>
#include <memory>

#include <dlock/core/backend/lease.hpp>

namespace dlock::redis::detail {

class redis_backend;
struct held_grant;

/// A grant, owned by the handle: release() deletes it on the servers and waits for them;
/// destruction releases it without waiting and reports a failure to the provider's hook. The
/// watchdog marks it lost through the lease's own lost signal.
class redis_lease final : public dlock::lease {
 public:
  redis_lease(std::shared_ptr<redis_backend> backend, std::shared_ptr<held_grant> grant,
              std::uint64_t fencing_token);
  ~redis_lease() override;
  void release() override;

  /// The grant: its keys and the token that the lock key holds while it is ours.
  const held_grant& grant() const noexcept { return *grant_; }

 private:
  std::shared_ptr<redis_backend> backend_;
  std::shared_ptr<held_grant> grant_;
  bool released_ = false;
};

}  // namespace dlock::redis::detail
