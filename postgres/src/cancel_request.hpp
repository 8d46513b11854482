// Private to dlock::postgres: asking the server to cancel a session's running statement, for a
// stop request during a wait (the pooled sessions' and the caller-driven ones').
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <libpq-fe.h>

#include <dlock/postgres/options.hpp>

namespace dlock::postgres::detail {

/// Cancels the statement of the server process `pid` started at `backend_start` (text of
/// pg_stat_activity.backend_start) over a session that is already open; false when it could
/// not (then PQcancel does). The backend's: pg_cancel_backend over its control session.
using canceller = std::function<bool(int pid, const std::string& backend_start)>;

/// The backend's canceller: pg_cancel_backend over a session of its own (`opts`' connection
/// string), opened on first use and kept open, guarded by backend_start so that a pid the
/// server has given to another session since is never signalled. Thread-safe.
canceller control_canceller(const options& opts, const std::string& endpoint);

/// How a cancel request went out (for tests and the docs): through the canceller, or
/// PQcancel (the fallback, which connects to the postmaster: one fork at the server).
enum class cancel_route { canceller, pq_cancel };

/// Sends a cancel request for the statement that `conn`'s session runs, through `by` when it
/// can (`backend_start` known), else PQcancel; on a short-lived thread of its own, so that
/// the caller never blocks on the server (a paused server never answers either). `cancelling`
/// is set until that thread is done: while it is set, a call sends nothing more (returns
/// false). `sent`, if given, runs on that thread with the route taken. True when sent.
bool send_cancel(PGconn* conn, const canceller& by, const std::string& backend_start,
                 const std::shared_ptr<std::atomic<bool>>& cancelling,
                 std::function<void(cancel_route)> sent = {});

}  // namespace dlock::postgres::detail
