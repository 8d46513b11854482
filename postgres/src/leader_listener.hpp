// Private to dlock::postgres: the LISTEN side of the election board (election_board.cpp). One
// session per provider, apart from the pool, LISTENs on the channel of every election that
// is watched, and hands each NOTIFY to that channel's watches. Proclaim, withdraw and the
// election lock's release NOTIFY the channel; a leader whose session dies sends nothing, which
// the observer's poll catches.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include <dlock/core/backend/election.hpp>
#include <dlock/postgres/options.hpp>

#include "connection_string.hpp"
#include "pg_connection.hpp"

namespace dlock::postgres::detail {

class leader_listener final : public std::enable_shared_from_this<leader_listener> {
 public:
  leader_listener(boost::asio::any_io_executor executor, const options& opts,
                  std::string endpoint);

  /// Calls `changed` (on the io thread) for every NOTIFY on `channel`, and once each time
  /// the LISTEN takes effect or the session is lost (a NOTIFY may have been missed then),
  /// until the returned object is destroyed. Any thread.
  std::shared_ptr<void> subscribe(const std::string& channel, std::function<void()> changed);
  /// Ends the session; on the io thread, or once it has stopped.
  void close();

 private:
  static constexpr std::chrono::seconds reconnect_pause{1};

  // io thread.
  void listen(const std::string& channel);
  void unlisten(const std::string& channel);
  void open_session();
  void session_lost(std::uint64_t generation);
  // Any thread.
  void tell(const std::string& channel);
  void tell_all();
  void unsubscribe(const std::string& channel, const std::shared_ptr<watch_callback>& watch);

  boost::asio::any_io_executor executor_;
  connection_parameters parameters_;
  std::string endpoint_;
  std::chrono::nanoseconds connect_timeout_;

  std::mutex mutex_;
  std::map<std::string, std::vector<std::shared_ptr<watch_callback>>> watches_;  // by channel

  std::shared_ptr<pg_connection> session_;  // io thread
  std::uint64_t generation_ = 0;            // of session_; io thread
  bool reconnecting_ = false;               // io thread
};

}  // namespace dlock::postgres::detail
