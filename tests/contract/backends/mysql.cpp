// The contract suite against dlock::mysql, on the MariaDB test server (DLOCK_TEST_MARIADB).
#include <algorithm>
#include <set>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "lock_name.hpp"  // mysql/src: the server names of every kind of hold
#include "mariadb_client.hpp"
#include "support.hpp"
#include "test_servers.hpp"

namespace contract {

namespace {

using dlock::mysql::detail::name_space;
using dlock::mysql::detail::server_name;

// Every named lock a name may use: the lock, the reader-writer lock's writer gate, upgrade gate
// and reader slots, the first slots of a semaphore (the suite uses max_count 4 at most), and
// the election's lock (first, so that break_lock can leave it out).
std::vector<std::string> server_names_of(const std::string& name) {
  std::vector<std::string> names{server_name(name_space::election, name),
                                 server_name(name_space::lock, name),
                                 server_name(name_space::writer_gate, name),
                                 server_name(name_space::upgrade_gate, name)};
  for (std::uint32_t i = 0; i < dlock::mysql::detail::reader_slots; ++i) {
    names.push_back(server_name(name_space::reader_slot, name, i));
  }
  for (std::uint32_t i = 0; i < 16; ++i) {
    names.push_back(server_name(name_space::semaphore_slot, name, i));
  }
  return names;
}

std::string is_used_locks(const std::vector<std::string>& names) {
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    sql += (i ? ", IS_USED_LOCK('" : "IS_USED_LOCK('") + names[i] + "')";
  }
  return sql;
}

class mariadb_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "mysql"; }

  // With the grant table, which the inspect cases need (mysql_test.cpp covers its absence).
  std::shared_ptr<dlock::provider> make_provider() override {
    return dlock::make_provider(url_ + "?grant_table=dlock_grants");
  }

  std::string url() const override { return url_ + "?grant_table=dlock_grants"; }

  // The server closes a silent client's connection, freeing its locks, after server_lease.
  leased_url nemesis_url() const override {
    return {url() + "&keepalive=1s&server_lease=2s", std::chrono::seconds(2)};
  }

  // Ends the connection that holds the name, as an operator's KILL or a server restart would.
  void break_lock(const std::string& name) override {
    auto names = server_names_of(name);
    names.erase(names.begin());  // the election's lock is apart from the lock `name`
    kill_holders(names, name);
  }

  void break_election(const std::string& name) override {
    kill_holders({server_name(name_space::election, name)}, name);
  }

  // The named locks of the name that are held, with their holder's connection, and the
  // connections waiting in GET_LOCK for one of them (every server name of a dlock name
  // carries the same hash, which the waiting statement's text shows).
  std::optional<std::vector<std::string>> server_footprint(const std::string& name) override {
    support::mariadb_client client(url_);
    const auto names = server_names_of(name);
    std::vector<std::string> footprint;
    const auto held = client.query(is_used_locks(names)).at(0);
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (held[i]) footprint.push_back("held " + names[i] + " by " + *held[i]);
    }
    for (const auto& row : client.query(
             "SELECT ID FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND "
             "INFO LIKE '%" + dlock::mysql::detail::name_hash(name) + "%'")) {
      footprint.push_back("waiting " + row.at(0).value_or("?"));
    }
    std::sort(footprint.begin(), footprint.end());
    return footprint;
  }

  // Every wait is a GET_LOCK in the process list: a lock's, a writer's (which also holds the
  // gate), a reader's at the gate and a semaphore waiter's at one slot.
  bool footprint_shows_waiters(dlock::primitive) const override { return true; }
  // A named lock ends with its session (docs/semantics.md, "Minimum hold time").
  bool keeps_min_hold() const override { return false; }
  // Holders from the grant table; waiters from the process list, which shows no owner.
  bool inspect_sees_every_owner() const override { return false; }

  void acquire_from_unreachable_endpoint() override {
    auto db = dlock::make_provider("mysql://dlock:dlock@" + unreachable_endpoint() +
                                   "/dlock_test?connect_timeout=2s");
    (void)db->create_lock("x").try_acquire();
  }

  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  std::string unreachable_endpoint() const override { return "127.0.0.1:1"; }

 private:
  void kill_holders(const std::vector<std::string>& names, const std::string& name) {
    support::mariadb_client client(url_);
    std::set<std::string> holders;
    const auto rows = client.query(is_used_locks(names));
    for (const auto& value : rows.at(0)) {
      if (value) holders.insert(*value);
    }
    if (holders.empty()) throw std::runtime_error("break: nobody holds '" + name + "'");
    for (const auto& id : holders) client.query("KILL CONNECTION " + id);
  }

  std::string url_ = support::require_test_server_endpoint("DLOCK_TEST_MARIADB");
};

}  // namespace

backend_fixture& backend() {
  static mariadb_fixture instance;
  return instance;
}

}  // namespace contract
