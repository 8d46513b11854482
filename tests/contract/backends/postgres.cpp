// The contract suite against dlock::postgres, on the test server (DLOCK_TEST_POSTGRES).
#include <algorithm>

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

// The pg_locks condition for the advisory key `key`: a bigint is classid (high 32 bits),
// objid (low 32), objsubid 1; a pair is classid (first), objid (second), objsubid 2.
std::string rows_of(const dlock::postgres::advisory_key& key) {
  const auto bits = static_cast<std::uint64_t>(key.key());
  return "(classid::bigint = " + std::to_string(bits >> 32) +
         " AND objid::bigint = " + std::to_string(bits & 0xffffffffu) +
         " AND objsubid = " + (key.is_pair() ? "2" : "1") + ")";
}

// The rows of the bigint keys first .. first + count - 1 (a semaphore's slots).
std::string rows_of_range(std::uint64_t first, std::uint64_t count) {
  std::string rows = "(false";
  for (std::uint64_t at = first, left = count; left > 0;) {
    // One run per high half: the low half may wrap within the range.
    const std::uint64_t in_run = std::min<std::uint64_t>(left, 0x100000000u - (at & 0xffffffffu));
    rows += " OR (objsubid = 1 AND classid::bigint = " + std::to_string(at >> 32) +
            " AND objid::bigint BETWEEN " + std::to_string(at & 0xffffffffu) + " AND " +
            std::to_string((at & 0xffffffffu) + in_run - 1) + ")";
    at += in_run;
    left -= in_run;
  }
  return rows + ")";
}

class postgres_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "postgres"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::postgres::provider>(
        dlock::postgres::options{.connection_string = url_,
                                 .owners_table = "dlock_owners",
                                 .locks_per_session = locks_per_session()});
  }

  // With the owners' table, which the inspect cases need (owners_test.cpp covers its absence).
  std::string url() const override {
    return url_ + "?owners_table=dlock_owners&locks_per_session=" +
           std::to_string(locks_per_session());
  }

  // The server ends a silent client's session (idle_session_timeout), freeing its locks, after
  // server_lease.
  leased_url nemesis_url() const override {
    return {url() + "&keepalive=1s&server_lease=2s", std::chrono::seconds(2)};
  }

  // Ends the session that holds the lock, as a server restart or an operator would.
  void break_lock(const std::string& name) override { terminate_holder(name, name); }

  // The election's lock is the key of "dlock-election:<name>" (docs/postgres.md).
  void break_election(const std::string& name) override {
    terminate_holder("dlock-election:" + name, name);
  }

  // pg_locks rows, granted or waiting, of the name's key (lock and reader-writer lock), of its
  // upgrade gate's key, of its semaphore's slot keys and of the marker key that holders of a
  // slot share (docs/postgres.md: the gate is the key of "dlock-upgrade-gate:<name>", slots
  // from the key of "dlock-semaphore:<name>", marker (its high half, n * 256 + 1)).
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    using dlock::postgres::advisory_key;
    const auto slots = static_cast<std::uint64_t>(
        advisory_key::from_name("dlock-semaphore:" + name).key());
    const std::string condition =
        rows_of(advisory_key::from_name(name)) + " OR " +
        rows_of(advisory_key::from_name("dlock-upgrade-gate:" + name)) + " OR " +
        rows_of_range(slots, 1000) +
        " OR (objsubid = 2 AND classid::bigint = " + std::to_string(slots >> 32) +
        " AND objid::bigint % 256 = 1)";
    pqxx::connection connection(url_);
    pqxx::nontransaction query(connection);
    std::vector<std::string> footprint;
    for (const auto& row : query.exec(
             "SELECT pid, mode, granted, classid, objid, objsubid FROM pg_locks "
             "WHERE locktype = 'advisory' AND (" + condition + ")")) {
      footprint.push_back("pid " + row[0].as<std::string>() + " " + row[1].as<std::string>() +
                          (row[2].as<bool>() ? " granted " : " waiting ") +
                          row[3].as<std::string>() + ":" + row[4].as<std::string>() + ":" +
                          row[5].as<std::string>());
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // A waiting lock or reader-writer lock is a pg_locks row not granted yet; a semaphore waiter
  // only LISTENs for releases and tries again, which pg_locks does not show.
  bool footprint_shows_waiters(dlock::primitive kind) const override {
    return kind != dlock::primitive::semaphore;
  }

  // An advisory lock ends with its session (docs/semantics.md, "Minimum hold time").
  bool keeps_min_hold() const override { return false; }

  bool pushes_leader_changes() const override { return true; }

  void acquire_from_unreachable_endpoint() override {
    auto pg = std::make_shared<dlock::postgres::provider>(dlock::postgres::options{
        .connection_string = "postgres://dlock:secret@" + unreachable_endpoint() + "/dlock_test",
        .connect_timeout = std::chrono::seconds(2)});
    (void)pg->create_lock("x").try_acquire();
  }

  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  void terminate_holder(const std::string& key_name, const std::string& name) {
    pqxx::connection connection(url_);
    pqxx::nontransaction query(connection);
    const auto killed = query.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND "
        "granted AND " + rows_of(dlock::postgres::advisory_key::from_name(key_name)));
    if (killed.empty()) throw std::runtime_error("break: nobody holds '" + name + "'");
  }

  std::string url_ = support::require_test_server_endpoint("DLOCK_TEST_POSTGRES");
};

}  // namespace

backend_fixture& backend() {
  static postgres_fixture instance;
  return instance;
}

}  // namespace contract
