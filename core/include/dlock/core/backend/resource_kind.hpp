// dlock/core/backend/resource_kind.hpp: dlock::resource_kind, what a backend is asked to hold
// (for backend implementers; start with backend.hpp).
//
// Users create three primitives (dlock::primitive, lock_kind.hpp). To build them and the
// election, core asks a backend for two more kinds of resource, which users never name:
// a reader-writer lock's upgrade gate and an election's lock. A backend sees every acquire
// (acquire_request::kind) and every name check (backend::check_name) as a resource_kind.
#pragma once

#include <dlock/core/lock_kind.hpp>

namespace dlock {

/// What a backend holds. A name is one resource per kind: a backend keeps the resources of
/// one name apart, except where it documents that two share one (the file backend's lock and
/// reader-writer lock of a name share a file, as flock(1) does).
///
/// lock, reader_writer_lock, semaphore: the primitives of the same names (to_resource_kind).
///
/// upgrade_gate: the exclusive lock that an upgradeable read and every write of a
/// reader-writer lock take first (docs/semantics.md, "Upgradeable reads"). A backend keeps it
/// apart from every other resource of the same name.
///
/// election: the exclusive lock whose holder leads the election of that name
/// (dlock/core/election.hpp); its fencing token is the leader's term. Only backends with an
/// election board (election.hpp beside this file) are ever asked for it, and they keep it
/// apart from every other resource of the same name, so an election never blocks a user's lock.
///
/// The values are in a fixed order, which acquire_all's canonical order relies on: do not
/// reorder them.
enum class resource_kind { lock, reader_writer_lock, semaphore, upgrade_gate, election };

/// The resource that holds the primitive `kind`.
constexpr resource_kind to_resource_kind(primitive kind) noexcept {
  switch (kind) {
    case primitive::lock: return resource_kind::lock;
    case primitive::reader_writer_lock: return resource_kind::reader_writer_lock;
    case primitive::semaphore: return resource_kind::semaphore;
  }
  return resource_kind::lock;
}

}  // namespace dlock
