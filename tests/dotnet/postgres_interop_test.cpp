// dlock and the real .NET DistributedLock library (DistributedLock.Postgres from NuGet) on one
// PostgreSQL server: the same name is the same lock to both (dotnet_side.hpp drives .NET).
#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <future>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/asio/use_future.hpp>
#include <dlock/dlock.hpp>
#include <dlock/postgres/transaction.hpp>

#include "dotnet_side.hpp"
#include "support.hpp"
#include "test_servers.hpp"

using namespace std::chrono_literals;
using dotnet_interop::granted_after;

namespace {

std::string server_url() { return support::require_test_server_endpoint("DLOCK_TEST_POSTGRES"); }

// postgres://user:password@host:port/database as Npgsql's connection string.
std::string npgsql_connection_string(const std::string& url) {
  static const std::regex shape(R"(postgres(?:ql)?://([^:@/]+):([^@/]*)@([^:/]+):(\d+)/([^?]+).*)");
  std::smatch m;
  if (!std::regex_match(url, m, shape)) throw std::runtime_error("unexpected test URL " + url);
  return "Host=" + m[3].str() + ";Port=" + m[4].str() + ";Username=" + m[1].str() +
         ";Password=" + m[2].str() + ";Database=" + m[5].str() + ";Pooling=false";
}

struct dotnet_side : dotnet_interop::dotnet_side {
  dotnet_side() : dotnet_interop::dotnet_side("postgres", npgsql_connection_string(server_url())) {}
};

// Names of each of .NET's key rules: ASCII up to 9 characters, 16 hex digits, two 8-hex-digit
// halves, and anything else hashed (allowHashing: true).
std::vector<std::string> names_of_every_rule() {
  const std::string tag = std::to_string(::getpid() % 100000);
  return {"n" + tag,
          "0000" + std::string(7 - std::min<std::size_t>(7, tag.size()), '0') + tag + "00ab1",
          "00000001," + std::string(8 - std::min<std::size_t>(8, tag.size()), '0') + tag,
          support::unique_name("a-name-longer-than-nine")};
}

}  // namespace

TEST_CASE(".NET's lock excludes dlock's, and dlock is granted once .NET releases",
          "[dotnet][postgres]") {
  dotnet_side dotnet;
  auto pg = dlock::make_provider(server_url());
  for (const auto& name : names_of_every_rule()) {
    INFO("name " << name);
    REQUIRE(dotnet.ask("hold lock " + name) == "held");
    CHECK_FALSE(pg->create_lock(name).try_acquire());
    auto held = granted_after(
        *pg, [&] { return pg->create_lock(name).async_acquire(60s, {}, boost::asio::use_future); },
        [&] { REQUIRE(dotnet.ask("release lock " + name) == "released"); });
    CHECK(dotnet.ask("try lock " + name) == "taken");
  }
}

TEST_CASE("dlock's lock excludes .NET's, and .NET is granted once dlock releases",
          "[dotnet][postgres]") {
  dotnet_side dotnet;
  auto pg = dlock::make_provider(server_url());
  for (const auto& name : names_of_every_rule()) {
    INFO("name " << name);
    auto held = pg->create_lock(name).acquire(10s);
    CHECK(dotnet.ask("try lock " + name) == "taken");
    dotnet.send("wait lock " + name + " 60000");
    // The wait's own answer comes only with the grant; nothing to see until then.
    CHECK_FALSE(dotnet.answer(200ms));
    held.release();
    const auto granted = dotnet.answer(60s);
    REQUIRE(granted);
    REQUIRE(granted->rfind("held ", 0) == 0);
    CHECK_FALSE(pg->create_lock(name).try_acquire());
    REQUIRE(dotnet.ask("release lock " + name) == "released");
    CHECK(pg->create_lock(name).try_acquire());
  }
}

TEST_CASE("transaction-scoped locks exclude session locks across dlock and .NET",
          "[dotnet][postgres]") {
  dotnet_side dotnet;
  auto pg = dlock::make_provider(server_url());
  const auto name = support::unique_name("xact");
  {
    // dlock's lock in a transaction of the caller's own against .NET's session lock.
    pqxx::connection connection(server_url());
    pqxx::work tx(connection);
    dlock::postgres::lock_in_transaction(tx, name, 5s);
    CHECK(dotnet.ask("try lock " + name) == "taken");
    tx.commit();  // ends the lock with the transaction
  }
  CHECK(dotnet.ask("try lock " + name) == "held");
  CHECK(dotnet.ask("release lock " + name) == "released");
  // .NET's lock in its own transaction against dlock's session lock.
  REQUIRE(dotnet.ask("hold xact " + name) == "held");
  CHECK_FALSE(pg->create_lock(name).try_acquire());
  REQUIRE(dotnet.ask("release xact " + name) == "released");
  CHECK(pg->create_lock(name).try_acquire());
}

TEST_CASE("reader-writer locks: readers share and writers exclude across dlock and .NET",
          "[dotnet][postgres]") {
  dotnet_side dotnet;
  auto pg = dlock::make_provider(server_url());
  const auto name = support::unique_name("rw");
  auto rw = pg->create_reader_writer_lock(name);

  REQUIRE(dotnet.ask("hold read " + name) == "held");
  {
    auto read = rw.try_acquire_read();
    CHECK(read);
    CHECK_FALSE(rw.try_acquire_write());
  }
  REQUIRE(dotnet.ask("release read " + name) == "released");

  {
    auto write = rw.acquire_write(10s);
    CHECK(dotnet.ask("try read " + name) == "taken");
    CHECK(dotnet.ask("try write " + name) == "taken");
  }
  {
    auto read = rw.acquire_read(10s);
    CHECK(dotnet.ask("try read " + name) == "held");
    CHECK(dotnet.ask("try write " + name) == "taken");
    REQUIRE(dotnet.ask("release read " + name) == "released");
  }

  REQUIRE(dotnet.ask("hold write " + name) == "held");
  CHECK_FALSE(rw.try_acquire_read());
  CHECK_FALSE(rw.try_acquire_write());
  auto write = granted_after(
      *pg, [&] { return rw.async_acquire_write(60s, {}, boost::asio::use_future); },
      [&] { REQUIRE(dotnet.ask("release write " + name) == "released"); });
  CHECK(write.held());
}
