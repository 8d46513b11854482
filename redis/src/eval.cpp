#include "eval.hpp"

namespace dlock::redis::detail {

namespace {

std::vector<std::string> evalsha_command(const script& which, const key_set& keys,
                                         const std::vector<std::string>& arguments) {
  std::vector<std::string> command{"EVALSHA", which.sha1, std::to_string(keys.keys.size())};
  command.insert(command.end(), keys.keys.begin(), keys.keys.end());
  command.insert(command.end(), arguments.begin(), arguments.end());
  return command;
}

// After a restart or SCRIPT FLUSH the server no longer knows a script: it is sent whole.
bool script_unknown(const command_result& result) {
  return !result.failure && result.value.is_error() && result.value.text.starts_with("NOSCRIPT");
}

void send_whole_script(std::vector<std::string>& command, const script& which) {
  command[0] = "EVAL";
  command[1] = which.source;
}

}  // namespace

void eval_with(command_sender send, const script& which, const key_set& keys,
               const std::vector<std::string>& arguments, reply_handler done) {
  auto command = evalsha_command(which, keys, arguments);
  auto retry = command;
  send(std::move(command), [send, &which, retry = std::move(retry),
                            done = std::move(done)](command_result result) mutable {
    if (script_unknown(result)) {
      send_whole_script(retry, which);
      send(std::move(retry), std::move(done));
      return;
    }
    done(std::move(result));
  });
}

void eval(node& target, const script& which, const key_set& keys,
          const std::vector<std::string>& arguments, reply_handler done) {
  eval_with([&target](std::vector<std::string> command,
                      reply_handler answer) { target.command(std::move(command), std::move(answer)); },
            which, keys, arguments, std::move(done));
}

command_result eval_here(node& target, const script& which, const key_set& keys,
                         const std::vector<std::string>& arguments) {
  auto command = evalsha_command(which, keys, arguments);
  command_result result = target.command_here(command);
  if (!script_unknown(result)) return result;
  send_whole_script(command, which);
  return target.command_here(command);
}

}  // namespace dlock::redis::detail
