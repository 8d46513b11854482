// The contract suite against dlock::postgres, on the test server (DLOCK_TEST_POSTGRES).
#include <pqxx/pqxx>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace contract {

namespace {

// The suite runs twice (tests/CMakeLists.txt): with every lock on a session of its own
// (DLOCK_TEST_POSTGRES_DEFAULT_LOCKS_PER_SESSION), and with the default, many locks per
// session. break_lock ends the holder's session, which rightly takes every lock of that
// session away (marked lost, and free on the server).
std::uint32_t locks_per_session() {
#ifdef DLOCK_TEST_POSTGRES_DEFAULT_LOCKS_PER_SESSION
  return DLOCK_TEST_POSTGRES_DEFAULT_LOCKS_PER_SESSION;
#else
  return 0;
#endif
}

class postgres_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "postgres"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::postgres::provider>(dlock::postgres::options{
        .connection_string = url_, .locks_per_session = locks_per_session()});
  }

  std::string url() const override {
    return url_ + "?locks_per_session=" + std::to_string(locks_per_session());
  }

  // Ends the session that holds the lock, as a server restart or an operator would.
  void break_lock(const std::string& name) override {
    const auto key = dlock::postgres::advisory_key::from_name(name);
    const auto bits = static_cast<std::uint64_t>(key.key());
    pqxx::connection connection(url_);
    pqxx::nontransaction query(connection);
    const auto killed = query.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND "
        "granted AND classid::bigint = " + std::to_string(bits >> 32) +
        " AND objid::bigint = " + std::to_string(bits & 0xffffffffu) +
        " AND objsubid = " + (key.is_pair() ? "2" : "1"));
    if (killed.empty()) throw std::runtime_error("break_lock: nobody holds '" + name + "'");
  }

  void acquire_from_unreachable_endpoint() override {
    auto pg = std::make_shared<dlock::postgres::provider>(dlock::postgres::options{
        .connection_string = "postgres://dlock:secret@" + unreachable_endpoint() + "/dlock_test",
        .connect_timeout = std::chrono::seconds(2)});
    (void)pg->create_lock("x").try_acquire();
  }

  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  std::string url_ = support::require_test_server_endpoint("DLOCK_TEST_POSTGRES");
};

}  // namespace

backend_fixture& backend() {
  static postgres_fixture instance;
  return instance;
}

}  // namespace contract
