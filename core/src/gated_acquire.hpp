// Private to core: acquires that go through a reader-writer lock's upgrade gate. A write
// takes the gate, then the write lock; an upgradeable read takes the gate, then a read lock
// (docs/semantics.md, "Upgradeable reads"). Plain reads do not take the gate.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>

#include <dlock/core/detail/acquire.hpp>

namespace dlock::detail {

/// Whether an acquire of `target` in `mode` goes through the gate: a write of a reader-writer
/// lock, unless it is a step of a gated acquire already.
bool gated(const lock_target& target, lock_mode mode) noexcept;

/// `target` as a step of a gated acquire: taken as asked, uncounted, without a hold limit.
lock_target step_of(const lock_target& target);

/// Takes the gate of `target` (a reader-writer lock), then `target` in `mode`, within one
/// timeout; the handle holds both (its lease is a gated_lease). As start_acquire otherwise.
void start_gated_acquire(const lock_target& target, lock_mode mode,
                         std::chrono::nanoseconds timeout, std::stop_token stop,
                         bool fail_with_error, try_acquire_completion done);

/// The blocking twin of start_gated_acquire; each step may take the inline fast path.
std::optional<lock_handle> gated_acquire_blocking(const lock_target& target, lock_mode mode,
                                                  std::chrono::nanoseconds timeout,
                                                  std::stop_token stop, bool fail_with_error);

}  // namespace dlock::detail
