// The reader-writer lock: readers share, writers exclude everyone, and where the backend
// prefers writers a waiting writer does not starve.
#include <future>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

TEST_CASE("readers share a reader-writer lock", "[contract][rw]") {
  const auto name = unique_name("readers");
  auto a = backend().make_provider();
  auto b = backend().make_provider();
  auto first = a->create_reader_writer_lock(name).try_acquire_read();
  auto second = b->create_reader_writer_lock(name).try_acquire_read();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->fencing_token() != second->fencing_token());
}

TEST_CASE("a writer excludes readers and writers, and readers exclude a writer",
          "[contract][rw]") {
  const auto name = unique_name("writer");
  auto a = backend().make_provider();
  auto b = backend().make_provider();
  auto writer = a->create_reader_writer_lock(name).acquire_write();
  CHECK_FALSE(b->create_reader_writer_lock(name).try_acquire_read());
  CHECK_FALSE(b->create_reader_writer_lock(name).try_acquire_write(10ms));
  writer.release();

  auto reader = a->create_reader_writer_lock(name).acquire_read();
  CHECK_FALSE(b->create_reader_writer_lock(name).try_acquire_write());
  REQUIRE_THROWS_AS(b->create_reader_writer_lock(name).acquire_write(10ms), dlock::timeout_error);
  reader.release();
  CHECK(b->create_reader_writer_lock(name).try_acquire_write());
}

TEST_CASE("tokens of read and write grants of one name strictly increase", "[contract][rw]") {
  const auto name = unique_name("rw-fencing");
  auto provider = backend().make_provider();
  auto rw = provider->create_reader_writer_lock(name);
  std::uint64_t previous = 0;
  for (int i = 0; i < 6; ++i) {
    auto handle = i % 2 ? rw.acquire_read(5s) : rw.acquire_write(5s);
    CHECK(handle.fencing_token() > previous);
    previous = handle.fencing_token();
  }
}

TEST_CASE("a waiting writer holds back new readers until it is granted or withdrawn",
          "[contract][rw][fairness]") {
  if (!backend().prefers_writers()) {
    WARN(backend().label() << " lets new readers in beside a waiting writer");
    return;
  }
  const auto name = unique_name("writer-first");
  auto readers = backend().make_provider();
  auto writers = backend().make_provider();
  auto first_reader = readers->create_reader_writer_lock(name).acquire_read(10s);
  std::stop_source stop;
  auto writer = writers->create_reader_writer_lock(name).async_acquire_write(
      1h, stop.get_token(), boost::asio::use_future);
  REQUIRE(wait_until([&] { return writers->metrics().waits == 1; }));
  // The writer's queue entry may still be on its way: a reader let in before it is queued is
  // no starvation, one let in after it is.
  CHECK(wait_until([&] {
    return !readers->create_reader_writer_lock(name).try_acquire_read().has_value();
  }));
  CHECK_FALSE(backend().make_provider()->create_reader_writer_lock(name).try_acquire_read());

  SECTION("the writer is granted once the readers before it are gone") {
    first_reader.release();
    REQUIRE(writer.wait_for(10s) == std::future_status::ready);
    CHECK(writer.get());
  }
  SECTION("a writer that stops waiting no longer holds back new readers") {
    stop.request_stop();
    REQUIRE(writer.wait_for(10s) == std::future_status::ready);
    CHECK_THROWS_AS(writer.get(), dlock::cancelled_error);
    CHECK(readers->create_reader_writer_lock(name).try_acquire_read());
  }
}
