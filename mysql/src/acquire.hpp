// Private to dlock::mysql: one acquire, from its first attempt to its grant or its end.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/backend.hpp>

#include "session.hpp"

namespace dlock::mysql::detail {

class mysql_backend;

/// One acquire: an attempt on a shared connection; then, if it must wait, GET_LOCK with a
/// timeout on a connection of its own (a semaphore waits at one slot for semaphore_retry,
/// then tries them all, and moves on to the next slot).
///
/// A stop sends KILL QUERY for the waiting statement from another connection, which ends the
/// server's wait at once; the waiting connection then gives back whatever the killed batch
/// took, so that the name is free once the stop is confirmed, and is closed, so that a KILL
/// that lands late leaves nothing behind. Runs on the io thread except cancel().
class mysql_acquire final : public acquire_operation,
                            public std::enable_shared_from_this<mysql_acquire> {
 public:
  mysql_acquire(std::shared_ptr<mysql_backend> backend, acquire_request request,
                acquire_completion done);

  /// Sends the first attempt. Io thread only.
  void start();

  void cancel() noexcept override;

 private:
  enum class phase { attempting, waiting, pausing, done };

  void attempted(query_result r);
  void grant(std::uint32_t slot, std::uint64_t token);
  void wait();
  void waited(query_result r);
  void pause_before_waiting();
  void stop();
  void kill_wait();
  void kill_answered();
  void give_back_killed_wait();
  void end_wait();
  void complete(std::exception_ptr error, std::unique_ptr<lease> granted);

  std::shared_ptr<mysql_backend> backend_;
  acquire_request request_;
  acquire_completion done_;
  std::string resource_;
  std::shared_ptr<mysql_session> session_;
  bool own_session_ = false;
  bool stopped_ = false;
  bool kill_sent_ = false;
  bool timed_out_ = false;  // stopped at or after the deadline, not by a stop request
  std::uint32_t next_slot_ = 0;  // where a semaphore waits next
  phase phase_ = phase::attempting;
  boost::asio::steady_timer timer_;
};

}  // namespace dlock::mysql::detail
