// The raw hiredis floors of dlock-redis-bench that need more than one command on one
// connection: a handoff between two processes, and RedLock's round trips to several servers.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dlock_bench {

/// host and port of one server.
using redis_endpoint = std::pair<std::string, int>;

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

/// A blocking connection; throws std::runtime_error when it cannot connect.
context_ptr connect(const redis_endpoint& server);

/// One command and its reply; throws std::runtime_error on a lost connection or an error reply.
reply_ptr run(redisContext* c, const std::vector<std::string>& arguments);

/// Two processes take strict turns on one key, as dlock's handoff() does, with raw blocking
/// hiredis connections: the holder sends a release script (compare, DEL, PUBLISH) on its command
/// connection; the waiter, blocked reading its subscriber connection, wakes on the message and
/// sends `SET key token NX PX` on its command connection. Each sample is the time from the
/// release sent to that SET answered OK. Forks: call it while this process has no threads.
std::vector<double> raw_handoff(const redis_endpoint& server, int rounds, int settle_us);

/// The round trips of one RedLock grant and its release, each sent to every server before any
/// reply is read (in parallel, as dlock's network thread sends them): GET of a counter, `SET
/// key token NX PX`, and an EVALSHA compare-and-delete. Microseconds per cycle.
std::vector<double> raw_parallel_floor(const std::vector<redis_endpoint>& servers,
                                       int iterations);

/// The servers of a `redis://host:port[,host:port...]` URL (no query).
std::vector<redis_endpoint> endpoints_of(const std::string& url);

}  // namespace dlock_bench
