#include "sync_connections.hpp"

#include <optional>

#include <boost/asio/io_context.hpp>

#include "connection.hpp"

namespace dlock::redis::detail {

struct sync_connections::pooled {
  explicit pooled(const server_settings& settings) : link(io.get_executor(), settings) {}

  /// Sends `arguments` and reads the reply straight on the socket when it can (logged in, a
  /// transport of its own descriptor); else, or the first time, runs the io_context until the
  /// reply or the failure came. The connection's own timeout bounds the wait either way.
  command_result run(const std::vector<std::string>& arguments) {
    if (auto now = link.command_now(arguments)) return std::move(*now);
    catch_up();
    std::optional<command_result> result;
    link.command(arguments, [&result](command_result r) { result = std::move(r); });
    io.restart();
    while (!result) io.run_one();
    return std::move(*result);
  }

  /// Takes in what happened while it lay idle (the server closed it: then it reconnects).
  void catch_up() {
    io.restart();
    io.poll();
  }

  boost::asio::io_context io{1};
  connection link;  // after io: destroyed before it
};

sync_connections::sync_connections(const server_settings& settings) : settings_(settings) {}

sync_connections::~sync_connections() = default;

command_result sync_connections::command(const std::vector<std::string>& arguments) {
  std::unique_ptr<pooled> taken;
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      taken = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (taken) {
    command_result result = taken->run(arguments);
    // A connection closed while idle (CLIENT KILL, a server restart, an idle timeout) is found
    // out only now (by the command's own read): try once more on a new one. A timeout is not retried, so that a hung
    // server costs one command timeout, not two.
    if (!result.failure || taken->link.timed_out()) {
      if (!result.failure) {
        std::lock_guard lock(mutex_);
        idle_.push_back(std::move(taken));
      }
      return result;
    }
  }
  taken = std::make_unique<pooled>(settings_);
  command_result result = taken->run(arguments);
  if (!result.failure) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(taken));
  }
  return result;
}

}  // namespace dlock::redis::detail
