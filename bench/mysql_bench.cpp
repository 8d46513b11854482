// dlock-mysql-bench: dlock::mysql beside the raw MariaDB Connector/C it is built on.
//
//   dlock-mysql-bench URL [--iterations N] [--handoffs N]
//
// URL: mysql://user:pw@host:port/db (the test server's DLOCK_TEST_MARIADB)
// round trip: one `SELECT 1` on a raw connection.
// floor: `SELECT GET_LOCK(name, 0)` + `SELECT RELEASE_LOCK(name)` on one raw blocking
//   connection: the two round trips an uncontended grant needs at least; "with token" adds
//   dlock's grant batch (GET_LOCK, then NEXTVAL of the fencing sequence, one round trip).
// uncontended: dlock acquire() + release of one lock with the default options, and with
//   `grant_table=dlock_grants` (a row per grant for the inspector), N times each, the samples
//   interleaved with the floor's, so that all see the same load on the machine.
// handoff: two processes take turns on one lock; each sample is the time from the holder
//   starting release() to the waiter's acquire() returning.
// docs/benchmarks.md records the figures and the command that produced them.
#include <mysql.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace {

using namespace dlock_bench;

// One raw blocking connection, as a service using Connector/C directly would have.
class raw_connection {
 public:
  explicit raw_connection(const std::string& url) : mysql_(mysql_init(nullptr)) {
    // mysql://user:pw@host:port/db
    const auto rest = url.substr(url.find("://") + 3);
    const auto at = rest.find('@');
    const auto credentials = rest.substr(0, at);
    const auto colon = credentials.find(':');
    const auto host_port = rest.substr(at + 1, rest.find('/', at) - at - 1);
    const auto database = rest.substr(rest.find('/', at) + 1);
    const auto port_at = host_port.rfind(':');
    if (!mysql_real_connect(mysql_, host_port.substr(0, port_at).c_str(),
                            credentials.substr(0, colon).c_str(),
                            credentials.substr(colon + 1).c_str(), database.c_str(),
                            static_cast<unsigned>(std::stoul(host_port.substr(port_at + 1))),
                            nullptr, CLIENT_MULTI_STATEMENTS)) {
      throw std::runtime_error(std::string("mysql: ") + mysql_error(mysql_));
    }
  }
  ~raw_connection() { mysql_close(mysql_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  // Runs a statement (or a batch) and drains its results.
  void run(const std::string& sql) {
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) {
      throw std::runtime_error(std::string("mysql: ") + mysql_error(mysql_));
    }
    do {
      if (MYSQL_RES* result = mysql_store_result(mysql_)) mysql_free_result(result);
    } while (mysql_next_result(mysql_) == 0);
  }

  double timed(const std::vector<std::string>& statements) {
    const auto start = clock_type::now();
    for (const auto& sql : statements) run(sql);
    return micros(clock_type::now() - start).count();
  }

 private:
  MYSQL* mysql_;
};

int option(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::cerr << "usage: dlock-mysql-bench URL [--iterations N] [--handoffs N]\n";
    return 64;
  }
  const std::string url = argv[1];
  const int iterations = option(argc, argv, "--iterations", 2000);
  const int handoffs = option(argc, argv, "--handoffs", 200);

  // Forks first, while this process has no threads.
  const auto turns = summarize(handoff(url, handoffs, std::chrono::microseconds(2000)));

  const std::string name = dlock::mysql::server_lock_name("bench-floor");
  raw_connection raw(url);
  raw.run("CREATE SEQUENCE IF NOT EXISTS dlock_fencing");
  auto provider = dlock::make_provider(url);
  auto recorded = dlock::make_provider(with_option(url, "grant_table=dlock_grants"));
  auto lock = provider->create_lock("bench-dlock");
  auto recorded_lock = recorded->create_lock("bench-dlock-recorded");
  // All interleaved, each sample the second of two cycles of its kind in a row
  // (bench_support.hpp says why); the first tenth warms up (connections opened, sequence and
  // grant table created).
  const std::string get = "GET_LOCK('" + name + "', 0)";
  const std::string release = "RELEASE_LOCK('" + name + "')";
  const auto dlock_cycle = [](dlock::distributed_lock& held) {
    return [&held] { return uncontended(held, 1).front(); };
  };
  std::vector<double> trip, floor, fenced, default_samples, recorded_samples;
  for (int i = -iterations / 10; i < iterations; ++i) {
    const double samples[] = {
        second_of_two([&] { return raw.timed({"SELECT 1"}); }),
        second_of_two([&] { return raw.timed({"SELECT " + get, "SELECT " + release}); }),
        second_of_two([&] {
          return raw.timed({"SELECT @g := IF(" + get + " = 1, 0, NULL); SELECT IF(@g "
                            "IS NULL, NULL, NEXTVAL(dlock_fencing))",
                            "DO " + release});
        }),
        second_of_two(dlock_cycle(lock)), second_of_two(dlock_cycle(recorded_lock))};
    if (i < 0) continue;
    std::vector<double>* into[] = {&trip, &floor, &fenced, &default_samples, &recorded_samples};
    for (std::size_t k = 0; k < std::size(into); ++k) into[k]->push_back(samples[k]);
  }
  const auto ours = summarize(default_samples);
  const auto floor_summary = summarize(floor);
  const auto fenced_summary = summarize(fenced);
  const auto recorded_summary = summarize(recorded_samples);

  print_row("raw SELECT 1 (one round trip)", summarize(trip), trip.size());
  print_row("raw GET_LOCK + RELEASE_LOCK", floor_summary, floor.size());
  print_row("raw floor: the same with the token batch", fenced_summary, fenced.size());
  print_row("dlock acquire() + release() (default)", ours, default_samples.size());
  print_row("the same, grant_table=dlock_grants", recorded_summary, recorded_samples.size());
  std::printf("%-44s median %9.2fx\n", "default / floor with token (goal 1.3x)",
              ours.median_us / fenced_summary.median_us);
  std::printf("%-44s median %9.2fx\n", "with grant rows / floor with token",
              recorded_summary.median_us / fenced_summary.median_us);
  print_row("handoff between two processes", turns, static_cast<std::size_t>(handoffs));
  print_async_rows(url, iterations);
  print_async_waiters(url, 10000);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-mysql-bench: " << e.what() << "\n";
  return 1;
}
