// dlock/core/lock_kind.hpp: the words for what a lock is and how it is held.
#pragma once

namespace dlock {

/// The three primitives a user creates (provider::create_lock, create_reader_writer_lock,
/// create_semaphore). A name is one resource per primitive: the lock "a" and the semaphore "a"
/// are unrelated, but the lock "a" and the reader-writer lock "a" may share a backend resource
/// where the backend documents it (the file backend does, as flock(1)). Backends are asked for
/// a wider set, which adds what core builds on them: dlock::resource_kind
/// (dlock/core/backend/resource_kind.hpp).
enum class primitive { lock, reader_writer_lock, semaphore };

/// exclusive: locks, writers and semaphore slots; shared: readers.
enum class lock_mode { exclusive, shared };

}  // namespace dlock
