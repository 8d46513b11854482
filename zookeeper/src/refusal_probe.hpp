// Private to dlock::zookeeper: why no server answered, when a server says so by closing.
//
// A ZooKeeper server over its maxClientCnxns limit for a client address accepts the
// connection and closes it at once, before reading anything; the C client only retries, so
// a session that never opens looks like an unreachable ensemble. A fresh connection of our
// own tells the two apart: a server that takes clients waits for the client to speak.
#pragma once

#include <chrono>
#include <string>

namespace dlock::zookeeper::detail {

/// " (<host:port> closed the connection at once: ...)" for the first of `hosts` ("h:p,h:p")
/// that closes a new connection within `wait` before anything is sent on it; empty when none
/// does (unreachable, silent, or taking clients).
std::string refusal_hint(const std::string& hosts, std::chrono::milliseconds wait);

}  // namespace dlock::zookeeper::detail
