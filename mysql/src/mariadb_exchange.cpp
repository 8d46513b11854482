#include "mariadb_exchange.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <errmsg.h>
#include <mysql.h>

namespace dlock::mysql::detail {

namespace {

unsigned whole_seconds(std::chrono::nanoseconds duration) {
  return static_cast<unsigned>(
      std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(duration).count()));
}

enum class waited { ready, late, failed };

// Waits for what a suspended call asked (`status`) until `deadline`; `ready` gets the events
// to resume it with.
waited wait_for(MYSQL* mysql, int status, std::chrono::steady_clock::time_point deadline,
                int& ready) {
  short events = 0;
  if (status & MYSQL_WAIT_READ) events |= POLLIN;
  if (status & MYSQL_WAIT_WRITE) events |= POLLOUT;
  if (status & MYSQL_WAIT_EXCEPT) events |= POLLPRI;
  pollfd fd{mysql_get_socket(mysql), events, 0};
  while (true) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return waited::late;
    const bool own_timeout = status & MYSQL_WAIT_TIMEOUT;
    if (own_timeout) {
      left = std::min(left, std::chrono::milliseconds(mysql_get_timeout_value_ms(mysql)));
    }
    const int polled = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (polled < 0 && errno != EINTR) return waited::failed;
    if (polled > 0) {
      ready = 0;
      if (fd.revents & (POLLIN | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_READ;
      if (fd.revents & (POLLOUT | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_WRITE;
      if (fd.revents & POLLPRI) ready |= MYSQL_WAIT_EXCEPT;
      ready &= status;
      if (ready == 0) ready = status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE);
      return waited::ready;
    }
    if (polled == 0 && own_timeout &&
        std::chrono::steady_clock::now() < deadline) {
      ready = MYSQL_WAIT_TIMEOUT;
      return waited::ready;
    }
  }
}

query_result broken(std::string why) {
  query_result r;
  r.connection_broken = true;
  r.error = CR_SERVER_LOST;
  r.message = std::move(why);
  return r;
}

}  // namespace

int start_connecting(MYSQL** connected, MYSQL* mysql, const options& opts) {
  mysql_options(mysql, MYSQL_OPT_NONBLOCK, nullptr);
  const unsigned timeout = whole_seconds(opts.connect_timeout);
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (opts.tls.enabled) {
    const my_bool enforce = 1;
    mysql_optionsv(mysql, MYSQL_OPT_SSL_ENFORCE, &enforce);
  }
  const my_bool verify = opts.tls.verify_server_cert ? 1 : 0;
  mysql_optionsv(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
  for (auto [option, value] : {std::pair{MYSQL_OPT_SSL_CA, &opts.tls.ca},
                               std::pair{MYSQL_OPT_SSL_CERT, &opts.tls.cert},
                               std::pair{MYSQL_OPT_SSL_KEY, &opts.tls.key}}) {
    if (!value->empty()) mysql_optionsv(mysql, option, value->c_str());
  }
  const bool unix_socket = !opts.host.empty() && opts.host.front() == '/';
  return mysql_real_connect_start(
      connected, mysql, unix_socket ? nullptr : opts.host.c_str(), opts.user.c_str(),
      opts.password.c_str(), opts.database.empty() ? nullptr : opts.database.c_str(),
      opts.port, unix_socket ? opts.host.c_str() : nullptr, CLIENT_MULTI_STATEMENTS);
}

// Connector/C 3.3 connects in the clear to a server without TLS even when told to enforce it:
// dlock checks.
std::string refusal_after_connect(MYSQL* mysql, bool tls_required) {
  if (tls_required && !mysql_get_ssl_cipher(mysql)) {
    return "TLS is required (ssl / ssl_mode) but the server does not offer it";
  }
  return {};
}

void keep_rows(query_result& into, MYSQL_RES* result) {
  into.rows.clear();
  const unsigned columns = mysql_num_fields(result);
  while (MYSQL_ROW row = mysql_fetch_row(result)) {
    const unsigned long* lengths = mysql_fetch_lengths(result);
    std::vector<std::optional<std::string>> values;
    for (unsigned i = 0; i < columns; ++i) {
      if (row[i]) {
        values.emplace_back(std::string(row[i], lengths[i]));
      } else {
        values.emplace_back(std::nullopt);
      }
    }
    into.rows.push_back(std::move(values));
  }
}

int mariadb_exchange::start(std::string_view sql) {
  phase_ = phase::query;
  collected_ = {};
  return advance(mysql_real_query_start(&int_return_, mysql_, sql.data(), sql.size()));
}

int mariadb_exchange::resume(int ready) {
  switch (phase_) {
    case phase::query: return advance(mysql_real_query_cont(&int_return_, mysql_, ready));
    case phase::store: return advance(mysql_store_result_cont(&result_return_, mysql_, ready));
    case phase::next: return advance(mysql_next_result_cont(&int_return_, mysql_, ready));
  }
  return 0;
}

// Follows each finished call with the next one, until one suspends or the batch has ended.
int mariadb_exchange::advance(int status) {
  while (status == 0) {
    if (phase_ != phase::store) {
      if (int_return_ != 0) {  // the query, or a later statement of the batch, failed
        failed();
        return 0;
      }
      phase_ = phase::store;
      status = mysql_store_result_start(&result_return_, mysql_);
      continue;
    }
    if (result_return_) {
      keep_rows(collected_, result_return_);
      mysql_free_result(result_return_);
      result_return_ = nullptr;
    } else if (mysql_errno(mysql_) != 0) {
      failed();
      return 0;
    }
    if (!mysql_more_results(mysql_)) return 0;
    phase_ = phase::next;
    status = mysql_next_result_start(&int_return_, mysql_);
  }
  return status;
}

void mariadb_exchange::failed() {
  const unsigned error = mysql_errno(mysql_);
  collected_.error = error;
  collected_.message = mysql_error(mysql_);
  collected_.connection_broken = error >= CR_MIN_ERROR && error <= CR_MAX_ERROR;
}

query_result exchange_blocking(MYSQL* mysql, const std::string& endpoint, std::string_view sql,
                               std::chrono::steady_clock::time_point deadline) {
  mariadb_exchange exchange(mysql);
  int status = exchange.start(sql);
  while (status != 0) {
    int ready = 0;
    switch (wait_for(mysql, status, deadline, ready)) {
      case waited::ready: break;
      case waited::late: return broken("no answer from " + endpoint + " in time");
      case waited::failed: return broken("cannot wait for " + endpoint);
    }
    status = exchange.resume(ready);
  }
  return std::move(exchange.result());
}

MYSQL* connect_blocking(const options& opts, const std::string& endpoint,
                        std::chrono::steady_clock::time_point deadline, std::string& why) {
  initialize_client_library();
  MYSQL* mysql = mysql_init(nullptr);
  if (!mysql) {
    why = "out of memory for a connection";
    return nullptr;
  }
  MYSQL* connected = nullptr;
  int status = start_connecting(&connected, mysql, opts);
  while (status != 0) {
    int ready = 0;
    const waited outcome = wait_for(mysql, status, deadline, ready);
    if (outcome != waited::ready) {
      why = "no connection to " + endpoint + " within connect_timeout";
      ::shutdown(mysql_get_socket(mysql), SHUT_RDWR);
      mysql_close(mysql);
      return nullptr;
    }
    status = mysql_real_connect_cont(&connected, mysql, ready);
  }
  why = connected ? refusal_after_connect(mysql, opts.tls.enabled) : mysql_error(mysql);
  if (why.empty()) return mysql;
  mysql_close(mysql);
  return nullptr;
}

}  // namespace dlock::mysql::detail
