// Private to dlock::mysql: one statement batch over Connector/C's non-blocking calls, as a
// plain object that says what it waits for, so that an io thread (async waits on the socket)
// and a caller's thread (poll(2) under a deadline) drive the same steps.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <dlock/mysql/options.hpp>

#include "connection.hpp"

struct st_mysql;
struct st_mysql_res;

namespace dlock::mysql::detail {

/// Sets what every connection of a provider asks for (non-blocking calls, the connect timeout,
/// utf8mb4, TLS) on a handle from mysql_init(); then starts connecting it. Returns the
/// suspended call's wait status (0: finished, `*connected` says how).
int start_connecting(st_mysql** connected, st_mysql* mysql, const options& opts);

/// Why a connection that finished connecting cannot be used (TLS required but not offered);
/// empty when it can.
std::string refusal_after_connect(st_mysql* mysql, bool tls_required);

/// Adds the rows of `result` to `into`, replacing those of an earlier result set.
void keep_rows(query_result& into, ::st_mysql_res* result);

/// Runs one batch: start() and resume() return the wait status of the suspended call
/// (MYSQL_WAIT_READ / _WRITE / _TIMEOUT bits), 0 once the batch has ended; then result() has
/// its rows or its failure. A client error (2000-2999) sets connection_broken.
class mariadb_exchange {
 public:
  explicit mariadb_exchange(st_mysql* mysql) noexcept : mysql_(mysql) {}

  int start(std::string_view sql);
  /// Resumes the suspended call with the events that happened (`ready`).
  int resume(int ready);
  query_result& result() noexcept { return collected_; }

 private:
  enum class phase { query, store, next };
  int advance(int status);
  void failed();

  st_mysql* mysql_;
  phase phase_ = phase::query;
  query_result collected_;
  // Out-parameters of the suspended call, which writes them when it finishes.
  int int_return_ = 0;
  ::st_mysql_res* result_return_ = nullptr;
};

/// Runs `sql` on `mysql` on the calling thread, waiting on its socket at most until
/// `deadline`; a connection that did not answer in time is reported broken (the caller closes
/// it: a late answer would be taken for the next statement's).
query_result exchange_blocking(st_mysql* mysql, const std::string& endpoint,
                               std::string_view sql,
                               std::chrono::steady_clock::time_point deadline);

/// Opens a connection with `opts` on the calling thread by `deadline`; nullptr with the reason
/// in `why` when it cannot.
st_mysql* connect_blocking(const options& opts, const std::string& endpoint,
                           std::chrono::steady_clock::time_point deadline, std::string& why);

}  // namespace dlock::mysql::detail
