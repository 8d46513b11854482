// Private to dlock::zookeeper: test-only seams, off by default. Nothing in the library sets
// them; a fault test uses one to place a fault where a real component cannot be timed.
#pragma once

namespace dlock::zookeeper::detail {

/// Called (when set) inside the C client's processing (on the provider's io thread) with the path of every node a
/// create made, before the answer is delivered; returning true drops the answer as if it had
/// been lost with the connection (the caller sees ZCONNECTIONLOSS, the node exists). A test
/// pauses the server inside it, so that the acquire cannot settle the create.
using create_answer_filter = bool (*)(const char* path);
/// Sets the filter for every provider of the process (nullptr: none, the default).
void set_create_answer_filter(create_answer_filter filter) noexcept;

}  // namespace dlock::zookeeper::detail
