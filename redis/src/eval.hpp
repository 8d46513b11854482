// Private to dlock::redis: running one of the scripts on one node, by SHA (EVALSHA), and sent
// whole (EVAL) only when the server answers NOSCRIPT (after a restart or SCRIPT FLUSH).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "keys.hpp"
#include "node.hpp"
#include "reply.hpp"
#include "scripts.hpp"

namespace dlock::redis::detail {

/// Runs `which` over `keys` on `target`; `done` gets the result. On the network thread.
/// Requires: `target` and `which` outlive the reply.
void eval(node& target, const script& which, const key_set& keys,
          const std::vector<std::string>& arguments, reply_handler done);

/// Sends one command and hands its result on: a node's command(), or the cluster's routing.
using command_sender = std::function<void(std::vector<std::string>, reply_handler)>;

/// As eval(), through `send` (called once, or twice after NOSCRIPT). Requires: `which`
/// outlives the reply.
void eval_with(command_sender send, const script& which, const key_set& keys,
               const std::vector<std::string>& arguments, reply_handler done);

/// As eval(), on a blocking connection from the calling thread (any thread).
command_result eval_here(node& target, const script& which, const key_set& keys,
                         const std::vector<std::string>& arguments);

}  // namespace dlock::redis::detail
