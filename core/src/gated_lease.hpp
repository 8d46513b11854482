// Private to core: the lease of a gated grant, the reader-writer lock's upgrade gate and a
// grant of the lock behind it held as one, and the steps of turning its read into a write.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>

#include <dlock/core/backend/lease.hpp>
#include <dlock/core/detail/acquire.hpp>

namespace dlock::detail {

/// The gate and one grant of the reader-writer lock (read or write), as one lease: its
/// fencing token is the grant's, it is lost as soon as either is lost (by the clock too: its
/// validity is the earlier of theirs), and releasing it releases the grant, then the gate.
///
/// An upgradeable read may swap its read grant for a write grant while it lives:
///
///   reading --begin_upgrade--> upgrading --end_upgrade(write)--> writing
///                                        --end_upgrade(read)---> reading (upgrade abandoned)
///                                        --abandon_upgrade-----> reading, lost, no grant
///   any --release--> released
///
/// The gate is held throughout, so no writer (they all take the gate) gets in between, and the
/// lost signal is the same one before and after.
///
/// Thread safety: every member may be called from any thread.
class gated_lease final : public lease {
 public:
  /// `grant`, taken in `mode` on the reader-writer lock `lock` (a step target), behind `gate`.
  gated_lease(lock_target lock, std::shared_ptr<lease> gate, std::shared_ptr<lease> grant,
              lock_mode mode);
  ~gated_lease() override;

  /// Releases the grant, then the gate. Throws the first connection_error after trying both.
  void release() override;

  /// The reader-writer lock, as a step target (its acquires are not gated again).
  const lock_target& lock() const noexcept { return lock_; }
  /// True once the grant is a write (granted so, or upgraded), also after a release.
  bool writes() const;

  /// Throws std::logic_error when the grant is a write already or an upgrade is under way.
  void check_upgradeable() const;
  /// Takes the read grant out for an upgrade; the caller releases it and asks for the write.
  /// Throws: std::logic_error when the grant is a write already or an upgrade is under way;
  /// dlock::lock_lost_error when the lease is lost or released.
  std::shared_ptr<lease> begin_upgrade();
  /// Ends an upgrade with `grant`: the write (upgraded), or a read taken back (the upgrade did
  /// not happen). The lease's fencing token becomes the grant's. Returns false, and releases
  /// `grant`, when the lease was released or lost meanwhile.
  bool end_upgrade(std::shared_ptr<lease> grant, lock_mode mode);
  /// Ends an upgrade that has no grant to end with: the lease is lost (and holds the gate
  /// alone until released).
  void abandon_upgrade() noexcept;

 private:
  enum class phase { reading, upgrading, writing, released };
  using watch = std::stop_callback<std::function<void()>>;

  gated_lease(lock_target lock, std::shared_ptr<lease> gate, std::shared_ptr<lease> grant,
              lock_mode mode, std::shared_ptr<grant_validity> validity);

  /// check_upgradeable(), with the mutex held.
  void refuse_misuse() const;
  /// Forwards the loss of `inner` to this lease's own lost signal.
  std::unique_ptr<watch> watch_for_loss(const lease& inner);

  // The earlier of the gate's and the grant's (null when neither expires by the clock): the
  // lease is lost by the clock when either is, without waiting for their lost signals.
  std::shared_ptr<grant_validity> validity_;
  lock_target lock_;
  mutable std::mutex mutex_;
  phase phase_;
  bool writes_;  ///< the grant is (or, released, was) a write
  std::shared_ptr<lease> gate_;
  std::shared_ptr<lease> grant_;
  std::unique_ptr<watch> gate_watch_;
  std::unique_ptr<watch> grant_watch_;
};

}  // namespace dlock::detail
