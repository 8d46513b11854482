// The MySQL backend's election board. The leader record is a row of options.election_table
// keyed by the election lock's server name: the grant's own batch writes its term and its
// connection's id (holder), and proclaim writes the value, each only while `holder` holds the
// election's named lock (IS_USED_LOCK in the same statement); a reader shows a row only while
// that is still so, and the release deletes it. The board's statements run on a connection
// and thread of its own: proclaim and withdraw may come from the provider's thread (an async
// campaign), which must not wait for itself. Observers poll (the core default).
#include <mutex>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/io_thread.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "statements.hpp"

namespace dlock::mysql::detail {

namespace {

class mysql_election_board final : public election_board {
 public:
  explicit mysql_election_board(std::shared_ptr<mysql_backend> backend)
      : backend_(std::move(backend)), table_(backend_->settings().election_table) {}

  ~mysql_election_board() override {
    io_.stop();
    if (connection_) connection_->close();
  }

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    const query_result r =
        run(proclaim_sql(table_, election, leadership.fencing_token(), value), election);
    if (leadership.lost() || r.value(0) != "1") {
      throw lock_lost_error(said(
          "the lead of term " + std::to_string(leadership.fencing_token()) +
              " is over; proclaim refused",
          election));
    }
  }

  void withdraw(std::string_view election, const lease& leadership) override {
    run(withdraw_sql(table_, election, leadership.fencing_token()), election);
  }

  std::optional<leader_info> leader(std::string_view election) override {
    const query_result r = run(leader_sql(table_, election), election);
    const auto term = r.value(0);
    const auto value = r.value(1);
    if (!term || !value) return std::nullopt;
    return leader_info{from_hex(*value), std::stoull(*term)};
  }

 private:
  std::string said(const std::string& what, std::string_view election) const {
    return backend_->message(what + " for election '" + naming::quote_for_message(election) +
                             "'");
  }

  query_result run(std::string sql, std::string_view election) {
    const auto& settings = backend_->settings();
    query_result r = call_and_wait<query_result>(
        io_.executor(), settings.connect_timeout + settings.release_timeout,
        said("no answer in time", election),
        [this, sql = std::move(sql)](const blocking_reply<query_result>& reply) {
          connection().execute(sql, [reply](query_result r) { reply.set_value(std::move(r)); });
        });
    if (!r.ok()) std::rethrow_exception(backend_->failure(r, election));
    return r;
  }

  // The board's thread only. A connection the server closed is replaced at the next call.
  // Its first statement creates the election table if it is missing, as the pool's do: a
  // leader() may come before any campaign. A failure shows in the next statement's error.
  mariadb_connection& connection() {
    if (!connection_ || connection_->broken()) {
      connection_ = std::make_shared<mariadb_connection>(io_.executor(), backend_->endpoint());
      connection_->connect(backend_->settings(), [] {});
      if (!table_created_) {
        connection_->execute(create_objects_sql(backend_->settings()),
                             [this](query_result r) { table_created_ = r.ok(); });
      }
    }
    return *connection_;
  }

  std::shared_ptr<mysql_backend> backend_;
  std::string table_;
  io_thread io_;
  std::shared_ptr<mariadb_connection> connection_;  // the board's thread only
  bool table_created_ = false;                        // the board's thread only
};

}  // namespace

std::shared_ptr<election_board> mysql_backend::elections() {
  if (options_.election_table.empty()) return nullptr;
  std::lock_guard lock(board_mutex_);
  std::shared_ptr<election_board> board = board_.lock();
  if (!board) {
    board = std::make_shared<mysql_election_board>(shared_from_this());
    board_ = board;
  }
  return board;
}

}  // namespace dlock::mysql::detail
