#include "session_pool.hpp"

#include <algorithm>

#include "statements.hpp"

namespace dlock::mysql::detail {

session_pool::session_pool(boost::asio::any_io_executor executor, const options& opts,
                           std::string endpoint, std::string setup,
                           std::function<void(mariadb_connection&)> opened)
    : executor_(std::move(executor)), options_(opts), endpoint_(std::move(endpoint)),
      setup_(std::move(setup)), opened_(std::move(opened)) {
  options_.on_error = nullptr;
}

std::shared_ptr<mysql_session> session_pool::open_session() {
  auto session = std::make_shared<mysql_session>();
  session->connection = std::make_shared<mariadb_connection>(executor_, endpoint_);
  std::weak_ptr<session_pool> weak_pool = weak_from_this();
  std::weak_ptr<mysql_session> weak_session = session;
  session->connection->connect(options_, [weak_pool, weak_session] {
    auto pool = weak_pool.lock();
    auto broken = weak_session.lock();
    if (pool && broken) pool->session_broken(broken);
  });
  // Before anything else: a lock taken on a connection without its server-side lease could
  // outlive a silent client for as long as the server's default wait_timeout (8 hours).
  session->connection->execute(setup_, [weak_session](query_result r) {
    auto failed = weak_session.lock();
    if (r.ok() || r.connection_broken || !failed) return;
    failed->connection->abandon("cannot set the server-side lease (" + r.message + ")");
  });
  opened_(*session->connection);
  sessions_.push_back(session);
  return session;
}

std::shared_ptr<mysql_session> session_pool::session_for_attempt(const std::string& resource) {
  forget_broken_sessions();
  for (auto& session : sessions_) {
    if (!session->reserved && !session->holds_or_attempts(resource)) return session;
  }
  return open_session();
}

// The probe names the grants it checks as they are when it is sent; a grant released or
// added meanwhile is judged at the next probe.
void session_pool::probe(const std::shared_ptr<mysql_session>& session,
                         dlock::detail::unique_function<void(bool)> answered) {
  std::vector<std::uint64_t> ids;
  std::vector<std::string> names;
  for (const auto& [id, grant] : session->grants) {
    ids.push_back(id);
    names.push_back(grant.server_name);
  }
  session->connection->execute(
      probe_sql(names),
      [session, ids, answered = std::move(answered)](query_result r) mutable {
        if (r.ok()) {
          const auto ours = r.value(0);
          std::vector<std::stop_source> lost;
          for (std::size_t i = 0; i < ids.size(); ++i) {
            auto grant = session->grants.find(ids[i]);
            if (grant != session->grants.end() && r.value(i + 1) != ours) {
              lost.push_back(grant->second.lost);
            }
          }
          for (auto& signal : lost) signal.request_stop();
        }
        answered(r.ok());
      });
}

}  // namespace dlock::mysql::detail
