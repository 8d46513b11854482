// The PostgreSQL backend's election board: the leader record is a row of the table
// dlock_leaders (created on first use), written by one statement that checks in pg_locks that
// the proclaiming grant's session still holds the election's advisory lock, and read only
// while it does. Every proclaim and withdraw (and the election lock's release, sql.cpp) NOTIFYs
// the election's channel, which observers LISTEN to (leader_listener.hpp); a leader whose
// session dies sends nothing, so observers still read every poll period.
#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "board_connection.hpp"
#include "election_key.hpp"
#include "fencing.hpp"
#include "leader_listener.hpp"
#include "sql.hpp"

namespace dlock::postgres::detail {

namespace {

// The session `pid` holds the election's advisory lock (the key is an integer literal).
std::string held_by(const std::string& pid, const std::string& election) {
  return "EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = " +
         pid + " AND " + pg_locks_match(election_key(election)) + ")";
}

// The server process of the session that holds the grant (pg_locks.pid).
int holder_pid(const lease& leadership) {
  if (const auto* pooled = dynamic_cast<const pg_lease*>(&leadership)) {
    return pooled->session()->connection->backend_pid();
  }
  return dynamic_cast<const pg_caller_lease&>(leadership).session()->extras.pid;
}

class pg_election_board final : public election_board {
 public:
  // Kept by the backend, so it holds no reference back: it needs only its settings and
  // executor (the listener's session runs there).
  pg_election_board(const postgres_backend& backend, std::string table)
      : prefix_(backend.message("")), table_(std::move(table)),
        listener_(std::make_shared<leader_listener>(backend.executor(), backend.settings(),
                                                    backend.endpoint())),
        connection_(backend.settings(), backend.endpoint(),
                    // Unlogged, as the owners' table: a crash ends every lead with its session.
                    "CREATE UNLOGGED TABLE IF NOT EXISTS " + table_ +
                        " (election bytea PRIMARY KEY, term bigint NOT NULL, value bytea NOT "
                        "NULL, pid integer NOT NULL)") {}
  // The backend's thread has stopped: the listener's session is closed here.
  ~pg_election_board() override { listener_->close(); }

  // One statement: the row is written only if the grant's session still holds the lock, and
  // never over a later term.
  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    const std::string name(election);
    const query_result r = run(
        "WITH written AS (INSERT INTO " + table_ + " AS l (election, term, value, pid) "
        "SELECT $1, $2, $3, $4 WHERE " + held_by("$4", name) + " ON CONFLICT (election) DO "
        "UPDATE SET term = excluded.term, value = excluded.value, pid = excluded.pid WHERE "
        "l.term <= excluded.term RETURNING 1) SELECT 1 FROM written, " + notify(name),
        {{name, bytea_oid},
         {std::to_string(leadership.fencing_token()), bigint_oid},
         {std::string(value), bytea_oid},
         {std::to_string(holder_pid(leadership)), integer_oid}},
        election);
    if (leadership.lost() || !r.rows || PQntuples(r.rows.get()) != 1) {
      throw lock_lost_error(said("the lead of term " + std::to_string(leadership.fencing_token()) +
                                     " is over; proclaim refused",
                                 election));
    }
  }

  void withdraw(std::string_view election, const lease& leadership) override {
    run("WITH gone AS (DELETE FROM " + table_ + " WHERE election = $1 AND term = $2) SELECT " +
            notify(std::string(election)),
        {{std::string(election), bytea_oid},
         {std::to_string(leadership.fencing_token()), bigint_oid}},
        election);
  }

  // A row whose session no longer holds the lock (crashed, broken, partitioned past its
  // server-side lease) is left for the next proclaim to replace, and never shown.
  std::optional<leader_info> leader(std::string_view election) override {
    const query_result r =
        run("SELECT l.term::text, l.value FROM " + table_ + " AS l WHERE l.election = $1 AND " +
                held_by("l.pid", std::string(election)),
            {{std::string(election), bytea_oid}}, election);
    if (!r.rows || PQntuples(r.rows.get()) != 1) return std::nullopt;
    const PGresult* row = r.rows.get();
    return leader_info{std::string(PQgetvalue(row, 0, 1), PQgetlength(row, 0, 1)),
                       std::stoull(std::string(PQgetvalue(row, 0, 0), PQgetlength(row, 0, 0)))};
  }

  std::shared_ptr<void> watch(std::string_view election, std::function<void()> changed) override {
    return listener_->subscribe(leader_channel(std::string(election)), std::move(changed));
  }

 private:
  // The channel is hex digits and '_' (leader_channel), safe as a literal.
  static std::string notify(const std::string& election) {
    return "pg_notify('" + leader_channel(election) + "', '')";
  }

  std::string said(const std::string& what, std::string_view election) const {
    return prefix_ + what + " for election '" + naming::quote_for_message(election) + "'";
  }

  query_result run(const std::string& sql, const std::vector<board_parameter>& parameters,
                   std::string_view election) {
    query_result r = connection_.run(sql, parameters);
    if (r.connection_broken) throw connection_error(said(r.message, election));
    if (!r.ok()) {
      throw dlock::error(said("the server refused the election statement (SQLSTATE " +
                                  r.sqlstate + "): " + r.message,
                              election));
    }
    return r;
  }

  std::string prefix_;  // "dlock: postgres <endpoint>: "
  std::string table_;
  std::shared_ptr<leader_listener> listener_;
  board_connection connection_;
};

}  // namespace

// Terms are fencing tokens: without the fencing sequence every term would be 0.
std::shared_ptr<election_board> postgres_backend::elections() {
  if (options_.fencing_sequence.empty()) return nullptr;
  std::lock_guard lock(board_mutex_);
  if (!board_) {
    board_ = std::make_shared<pg_election_board>(*this,
                                                 beside_fencing_sequence(options_.fencing_sequence, "dlock_leaders"));
  }
  return board_;
}

}  // namespace dlock::postgres::detail
