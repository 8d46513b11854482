// dlock::mysql's connection against the MariaDB test server: what the pools built on it rely
// on, one handler of its io_context at a time.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <dlock/core/backend/provider_url.hpp>

#include "connection.hpp"
#include "support.hpp"
#include "url_options.hpp"

using namespace std::chrono_literals;
using dlock::mysql::detail::mariadb_connection;
using dlock::mysql::detail::query_result;

namespace {

dlock::mysql::options test_server_options() {
  auto url = dlock::provider_url::parse(
      support::require_test_server_endpoint("DLOCK_TEST_MARIADB"));
  return dlock::mysql::detail::options_from_url(url);
}

}  // namespace

// The pool closes a connection that holds nothing and is not busy. A statement's answer is
// handed to its handler by a later handler of the io_context: were the connection idle in
// between, a release's handler could close it while the answer of the attempt queued behind
// the release, a grant, was on its way (two holders of one lock, seen under load).
TEST_CASE("a connection is busy until its last answer has reached its handler", "[mysql]") {
  boost::asio::io_context io;
  const auto opts = test_server_options();
  auto connection = std::make_shared<mariadb_connection>(
      io.get_executor(), opts.host + ":" + std::to_string(opts.port));
  connection->connect(opts, [] {});
  int answered = 0;
  for (const char* sql : {"DO 1", "SELECT 2"}) {
    connection->execute(sql, [&](query_result r) {
      CHECK(r.ok());
      ++answered;
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (answered < 2 && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(100ms);
    if (answered < 2) REQUIRE(connection->busy());
  }
  REQUIRE(answered == 2);
  CHECK_FALSE(connection->busy());
  connection->close();
}

// The connection may break (a failed unlock abandons it, a keepalive gives it up, the server
// ends it) after the server answered a statement and before that answer reached its handler.
// Whatever the answer granted ended with the connection, so the handler must hear a broken
// connection, not a grant that nobody would ever tell lost. A sweep breaks a new connection
// after each handler of the io_context in turn, until the answer comes first; the moment the
// answer has been read and handed on is one of them, unless the answer came in pieces, so the
// sweep runs again until it has broken a connection there (most sweeps do).
TEST_CASE("an answer read before the connection broke reaches its handler as broken",
          "[mysql]") {
  const auto opts = test_server_options();
  bool broke_between_answer_and_handler = false;
  for (int sweep = 0; sweep < 50 && !broke_between_answer_and_handler; ++sweep) {
    for (int handlers_before_break = 0;; ++handlers_before_break) {
      INFO("sweep " << sweep << ", break after " << handlers_before_break << " handlers");
      REQUIRE(handlers_before_break < 1000);
      boost::asio::io_context io;
      auto connection = std::make_shared<mariadb_connection>(
          io.get_executor(), opts.host + ":" + std::to_string(opts.port));
      connection->connect(opts, [] {});
      std::optional<query_result> answer;
      connection->execute("SELECT 1", [&](query_result r) { answer = std::move(r); });
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      for (int i = 0; i < handlers_before_break && !answer; ++i) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        io.run_one_for(1s);
      }
      if (answer) {  // it came before the break: this sweep is over
        CHECK(answer->ok());
        connection->close();
        break;
      }
      connection->abandon("broken by the test");
      while (!answer && std::chrono::steady_clock::now() < deadline) io.run_one_for(100ms);
      REQUIRE(answer);
      REQUIRE(answer->connection_broken);
      CHECK_FALSE(answer->ok());
      if (answer->message.find("after the server answered") != std::string::npos) {
        broke_between_answer_and_handler = true;
      }
    }
  }
  CHECK(broke_between_answer_and_handler);
}
