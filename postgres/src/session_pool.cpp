#include "session_pool.hpp"

#include <algorithm>

#include "sql.hpp"

namespace dlock::postgres::detail {

session_pool::session_pool(boost::asio::any_io_executor executor, const options& opts,
                           std::string endpoint, session_setup setup, hooks hooks)
    : executor_(std::move(executor)),
      endpoint_(std::move(endpoint)),
      setup_(std::move(setup)),
      parameters_(opts),
      connect_timeout_(opts.connect_timeout),
      locks_per_session_(opts.locks_per_session),
      hooks_(std::move(hooks)) {}

std::shared_ptr<pg_session> session_pool::open_session() {
  auto session = std::make_shared<pg_session>();
  session->connection = std::make_shared<pg_connection>(executor_, endpoint_);
  session->connection->set_canceller(hooks_.cancel);
  std::weak_ptr<session_pool> weak_pool = weak_from_this();
  std::weak_ptr<pg_session> weak_session = session;
  session->connection->connect(
      parameters_.keywords(), parameters_.values(), connect_timeout_,
      [weak_pool, weak_session] {
        auto pool = weak_pool.lock();
        auto broken = weak_session.lock();
        if (pool && broken) pool->session_broken(broken);
      },
      [weak_pool](const std::string& channel) {
        if (auto pool = weak_pool.lock()) pool->hooks_.notified(channel);
      });
  // Before anything else: a lock taken on a session without its server-side lease could
  // outlive a silent client for as long as TCP lets it.
  session->connection->execute(setup_.required, [weak_session](query_result r) {
    auto failed = weak_session.lock();
    if (r.ok() || r.connection_broken || !failed) return;
    failed->connection->abandon("cannot set the server-side lease (" + r.message +
                                "; idle_session_timeout needs PostgreSQL 14 or later)");
  });
  // With the session's start, which lets a stop cancel its wait by pid (pg_connection.hpp).
  session->connection->execute(
      setup_.optional + "; " + own_backend_start_sql(),
      [weak_session](query_result r) {
        auto session = weak_session.lock();
        if (session && r.ok() && r.value()) session->connection->set_backend_start(*r.value());
      });
  hooks_.opened(*session->connection);
  sessions_.push_back(session);
  return session;
}

std::shared_ptr<pg_session> session_pool::session_for_attempt(const std::string& resource) {
  forget_broken_sessions();
  for (auto& session : sessions_) {
    const bool full =
        locks_per_session_ != 0 && session->grants.size() >= locks_per_session_;
    if (!session->reserved && !session->connection->broken() && !full &&
        !session->holds_or_attempts(resource)) {
      return session;
    }
  }
  return open_session();
}

}  // namespace dlock::postgres::detail
