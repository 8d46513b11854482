#include "cancel_request.hpp"

#include <thread>
#include <utility>

#include "board_connection.hpp"

namespace dlock::postgres::detail {

canceller control_canceller(const options& opts, const std::string& endpoint) {
  return [control = std::make_shared<board_connection>(opts, endpoint, "")](
             int pid, const std::string& backend_start) {
    const query_result r = control->run(
        "SELECT pg_cancel_backend(pid)::text FROM pg_stat_activity WHERE pid = $1 AND "
        "backend_start::text = $2",
        {{std::to_string(pid), 23}, {backend_start, 25}});
    return r.ok() && r.value() == "true";  // results come as binary: text is its bytes
  };
}

// pg_cancel_backend over a session that is open takes one round trip; PQcancel connects to the
// server (which forks a process for it) and waits for it to close, with no timeout.
bool send_cancel(PGconn* conn, const canceller& by, const std::string& backend_start,
                 const std::shared_ptr<std::atomic<bool>>& cancelling,
                 std::function<void(cancel_route)> sent) {
  if (cancelling->exchange(true)) return false;
  PGcancel* cancel = PQgetCancel(conn);
  if (!cancel) {
    *cancelling = false;
    return false;
  }
  std::thread([cancel, cancelling, by, pid = PQbackendPID(conn), started = backend_start,
               sent = std::move(sent)] {
    cancel_route route = cancel_route::canceller;
    if (!(by && !started.empty() && by(pid, started))) {
      char error[256];
      PQcancel(cancel, error, sizeof error);
      route = cancel_route::pq_cancel;
    }
    PQfreeCancel(cancel);
    if (sent) sent(route);
    *cancelling = false;
  }).detach();
  return true;
}

}  // namespace dlock::postgres::detail
