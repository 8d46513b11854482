// The reader-writer lock: readers share, writers exclude everyone, and a waiting writer holds
// back new readers, so writers do not starve (DESIGN.md).
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
          "[contract][deployment][rw]") {
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

namespace {

using pending_write = std::future<dlock::lock_handle>;
using pending_read = std::future<dlock::lock_handle>;

// A name read by one reader, and a writer waiting (up to `writer_timeout`) behind it.
struct writer_behind_reader {
  explicit writer_behind_reader(std::chrono::milliseconds writer_timeout)
      : first_reader(readers->create_reader_writer_lock(name).acquire_read(10s)),
        writer(writers->create_reader_writer_lock(name).async_acquire_write(
            writer_timeout, stop.get_token(), boost::asio::use_future)) {
    REQUIRE(wait_until([&] { return writers->metrics().waits == 1; }));
  }

  // A reader of a fresh client, started once the writer waits.
  pending_read later_reader() {
    return later->create_reader_writer_lock(name).async_acquire_read(10s, {},
                                                                     boost::asio::use_future);
  }

  const std::string name = unique_name("writer-first");
  std::shared_ptr<dlock::provider> readers = backend().make_provider();
  std::shared_ptr<dlock::provider> writers = backend().make_provider();
  std::shared_ptr<dlock::provider> later = backend().make_provider();
  std::stop_source stop;
  dlock::lock_handle first_reader;
  pending_write writer;
};

void check_granted(pending_read& read) {
  REQUIRE(read.wait_for(10s) == std::future_status::ready);
  CHECK_NOTHROW(read.get());
}

}  // namespace

TEST_CASE("a waiting writer holds back new readers until it is granted",
          "[contract][deployment][rw][fairness]") {
  writer_behind_reader scene(1h);
  // The writer's queue entry may still be on its way: a reader let in before it is queued is
  // no starvation, one let in after it is.
  CHECK(wait_until([&] {
    return !scene.readers->create_reader_writer_lock(scene.name).try_acquire_read().has_value();
  }));
  // Neither a reader of another client nor one of the writer's own provider gets in.
  CHECK_FALSE(backend().make_provider()->create_reader_writer_lock(scene.name).try_acquire_read());
  CHECK_FALSE(scene.writers->create_reader_writer_lock(scene.name).try_acquire_read());
  // A reader that waits is not let in beside the first reader either, nor before the writer.
  auto later_reader = scene.later_reader();
  REQUIRE(wait_until([&] { return scene.later->metrics().waits == 1; }));
  CHECK(later_reader.wait_for(50ms) == std::future_status::timeout);

  scene.first_reader.release();
  REQUIRE(scene.writer.wait_for(10s) == std::future_status::ready);
  auto written = scene.writer.get();
  CHECK(later_reader.wait_for(50ms) == std::future_status::timeout);
  written.release();
  check_granted(later_reader);
}

TEST_CASE("a writer that stops waiting no longer holds back new readers",
          "[contract][deployment][rw][fairness]") {
  writer_behind_reader scene(1h);
  CHECK(wait_until([&] {
    return !scene.readers->create_reader_writer_lock(scene.name).try_acquire_read().has_value();
  }));
  auto later_reader = scene.later_reader();
  REQUIRE(wait_until([&] { return scene.later->metrics().waits == 1; }));
  scene.stop.request_stop();
  REQUIRE(scene.writer.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(scene.writer.get(), dlock::cancelled_error);
  check_granted(later_reader);
  CHECK(scene.readers->create_reader_writer_lock(scene.name).try_acquire_read());
}

TEST_CASE("a writer whose wait timed out no longer holds back new readers",
          "[contract][rw][fairness]") {
  // Long enough for the writer's first attempt to come back and count as a wait on a loaded
  // machine (its first connection under ASan took over 300 ms in a CI run), short enough to
  // time out well before the later reader's 10 s.
  writer_behind_reader scene(2s);
  auto later_reader = scene.later_reader();
  REQUIRE(scene.writer.wait_for(10s) == std::future_status::ready);
  CHECK_THROWS_AS(scene.writer.get(), dlock::timeout_error);
  check_granted(later_reader);
  CHECK(scene.readers->create_reader_writer_lock(scene.name).try_acquire_read());
}
