// The reader-writer lock: readers share, writers exclude everyone.
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;

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
