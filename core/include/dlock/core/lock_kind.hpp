// dlock/core/lock_kind.hpp: the words for what a lock is and how it is held.
#pragma once

namespace dlock {

/// The three primitives, and what backends hold for a reader-writer lock's upgradeable reads.
/// A name is one resource per primitive: the lock "a" and the semaphore "a" are unrelated,
/// but the lock "a" and the reader-writer lock "a" may share a backend resource where the
/// backend documents it (the file backend does, as flock(1)).
///
/// upgrade_gate is no primitive of its own for users: it is the exclusive lock that an
/// upgradeable read and every write of a reader-writer lock take first (docs/semantics.md,
/// "Upgradeable reads"). Backends keep it apart from every primitive of the same name.
///
/// election is the exclusive lock whose holder leads the election of that name
/// (dlock/core/election.hpp); its fencing token is the leader's term. Only backends with an
/// election board (dlock/core/backend/election.hpp) are ever asked for it, and they keep it
/// apart from every primitive of the same name, so an election never blocks a user's lock.
enum class primitive { lock, reader_writer_lock, semaphore, upgrade_gate, election };

/// exclusive: locks, writers and semaphore slots; shared: readers.
enum class lock_mode { exclusive, shared };

}  // namespace dlock
