// The inspector: who holds a name, with which owner and token, who waits; and an
// administrator's break, which frees the name and fences its holders out.
#include <catch2/catch.hpp>

#include <future>
#include <optional>
#include <string>
#include <thread>

#include "backend.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using contract::backend;
using support::unique_name;
using support::wait_until;

namespace {

const dlock::lock_party* holder_with_token(const dlock::lock_inspection& found,
                                           std::uint64_t token) {
  for (const auto& holder : found.holders) {
    if (holder.fencing_token == token) return &holder;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("inspect shows the holder of a lock with its owner, token and start",
          "[contract][deployment][inspect]") {
  auto provider = backend().make_provider();
  auto observer = backend().make_provider();
  const auto name = unique_name("inspect-held");
  CHECK(observer->inspect(name).holders.empty());

  const auto before = std::chrono::system_clock::now() - 1s;
  auto held = provider->create_lock(name).with_owner("nightly import on build-7").acquire(10s);
  const auto found = observer->inspect(name);
  CHECK(found.name == name);
  REQUIRE(found.holders.size() == 1);
  const auto& holder = found.holders.front();
  CHECK(holder.kind == dlock::party_kind::exclusive);
  CHECK(holder.owner == "nightly import on build-7");
  CHECK(holder.fencing_token == held.fencing_token());
  if (backend().inspect_sees_since()) {
    REQUIRE(holder.since);
    CHECK(*holder.since >= before);
    CHECK(*holder.since <= std::chrono::system_clock::now() + 1s);
  } else {
    CHECK_FALSE(holder.since);  // never guessed
  }
  CHECK(found.waiters.empty());

  held.release();
  CHECK(observer->inspect(name).holders.empty());
}

TEST_CASE("a grant carries its provider's owner, host, pid and program by default",
          "[contract][inspect]") {
  auto provider = backend().make_provider();
  auto observer = backend().make_provider();
  CHECK(provider->owner() == dlock::default_owner());
  CHECK(provider->owner().find(" pid ") != std::string::npos);
  const auto name = unique_name("inspect-owner");

  auto by_default = provider->create_lock(name).acquire(10s);
  REQUIRE(observer->inspect(name).holders.size() == 1);
  CHECK(observer->inspect(name).holders.front().owner == dlock::default_owner());
  by_default.release();

  provider->set_owner("report worker 3");
  auto renamed = provider->create_lock(name).acquire(10s);
  REQUIRE(observer->inspect(name).holders.size() == 1);
  CHECK(observer->inspect(name).holders.front().owner == "report worker 3");
}

TEST_CASE("an owner that cannot be stored is refused before anything is sent",
          "[contract][inspect]") {
  auto provider = backend().make_provider();
  auto lock = provider->create_lock(unique_name("inspect-bad-owner"));
  CHECK_THROWS_AS(lock.with_owner("two\nlines"), std::invalid_argument);
  CHECK_THROWS_AS(lock.with_owner(std::string(257, 'x')), std::invalid_argument);
  CHECK_THROWS_AS(provider->set_owner("tab\there"), std::invalid_argument);
  CHECK_THROWS_AS((void)provider->inspect(""), std::invalid_argument);
}

TEST_CASE("inspect shows every reader of a reader-writer lock and every semaphore slot",
          "[contract][inspect]") {
  auto first = backend().make_provider();
  auto second = backend().make_provider();
  auto observer = backend().make_provider();
  const auto name = unique_name("inspect-shared");

  auto rw = first->create_reader_writer_lock(name);
  auto reader_one = rw.with_owner("reader one").acquire_read(10s);
  auto reader_two = second->create_reader_writer_lock(name).with_owner("reader two").acquire_read(10s);
  auto found = observer->inspect(name);
  REQUIRE(found.holders.size() == 2);
  for (const auto& holder : found.holders) CHECK(holder.kind == dlock::party_kind::read);
  if (backend().inspect_sees_every_owner()) {
    const auto* one = holder_with_token(found, reader_one.fencing_token());
    const auto* two = holder_with_token(found, reader_two.fencing_token());
    REQUIRE(one);
    REQUIRE(two);
    CHECK(one->owner == "reader one");
    CHECK(two->owner == "reader two");
  }
  reader_one.release();
  reader_two.release();

  auto writer = rw.with_owner("the writer").acquire_write(10s);
  found = observer->inspect(name);
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().kind == dlock::party_kind::write);
  CHECK(found.holders.front().owner == "the writer");
  writer.release();

  const auto semaphore_name = unique_name("inspect-slots");
  auto slot_one = first->create_semaphore(semaphore_name, 3).with_owner("encoder 1").acquire(10s);
  auto slot_two = second->create_semaphore(semaphore_name, 3).with_owner("encoder 2").acquire(10s);
  found = observer->inspect(semaphore_name);
  REQUIRE(found.holders.size() == 2);
  for (const auto& holder : found.holders) CHECK(holder.kind == dlock::party_kind::semaphore_slot);
  const auto* one = holder_with_token(found, slot_one.fencing_token());
  REQUIRE(one);
  CHECK(one->owner == "encoder 1");
  if (found.max_count) CHECK(*found.max_count == 3u);
}

TEST_CASE("inspect shows the waiters the backend can see", "[contract][inspect]") {
  auto holder = backend().make_provider();
  auto waiter = backend().make_provider();
  auto observer = backend().make_provider();
  const auto name = unique_name("inspect-waiters");
  auto held = holder->create_lock(name).with_owner("holder").acquire(10s);
  if (!observer->inspect(name).waiters_visible) {
    DLOCK_SKIP(backend().label() << " cannot see who waits for a lock");
  }
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    return waiter->create_lock(name).with_owner("waiter").try_acquire(30s, stop.get_token());
  });
  REQUIRE(wait_until([&] { return !observer->inspect(name).waiters.empty(); }, 10s));
  const auto found = observer->inspect(name);
  REQUIRE(found.waiters.size() == 1);
  CHECK(found.waiters.front().kind == dlock::party_kind::exclusive);
  if (backend().inspect_sees_every_owner()) CHECK(found.waiters.front().owner == "waiter");
  stop.request_stop();
  CHECK_FALSE(waiting.get());
  REQUIRE(wait_until([&] { return observer->inspect(name).waiters.empty(); }, 10s));
}

TEST_CASE("list_locks lists the names held under a prefix, held longest first",
          "[contract][deployment][inspect]") {
  auto provider = backend().make_provider();
  auto observer = backend().make_provider();
  const auto prefix = unique_name("inspect-list") + "/";
  auto older = provider->create_lock(prefix + "b-older").acquire(10s);
  // Starts are compared at the backend's resolution (milliseconds at worst so far).
  const auto started = std::chrono::system_clock::now();
  REQUIRE(wait_until([&] { return std::chrono::system_clock::now() - started > 20ms; }, 5s));
  auto newer = provider->create_lock(prefix + "a-newer").acquire(10s);
  auto elsewhere = provider->create_lock(unique_name("inspect-unlisted")).acquire(10s);

  const auto listed = observer->list_locks(prefix);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].name == prefix + "b-older");
  CHECK(listed[1].name == prefix + "a-newer");
  CHECK(listed[0].holders.size() == 1);
  newer.release();
  CHECK(observer->list_locks(prefix).size() == 1);
}

TEST_CASE("break_lock frees a held lock and fences its holder out",
          "[contract][deployment][inspect][break]") {
  auto holder = backend().make_provider();
  auto next = backend().make_provider();
  auto admin = backend().make_provider();
  const auto name = unique_name("inspect-break");
  auto held = holder->create_lock(name).acquire(10s);
  const auto broken_token = held.fencing_token();

  admin->break_lock(name);
  REQUIRE(wait_until([&] { return held.lost(); }, 30s));
  auto taken = next->create_lock(name).try_acquire(10s);
  REQUIRE(taken);
  CHECK(taken->fencing_token() > broken_token);
  const auto found = admin->inspect(name);
  REQUIRE(found.holders.size() == 1);
  CHECK(found.holders.front().fencing_token == taken->fencing_token());
  held.release();  // the broken holder's release leaves the new grant alone
  CHECK(admin->inspect(name).holders.size() == 1);
  CHECK_FALSE(taken->lost());
}

TEST_CASE("break_lock frees every reader and semaphore slot of a name",
          "[contract][inspect][break]") {
  auto holder = backend().make_provider();
  auto admin = backend().make_provider();
  const auto name = unique_name("inspect-break-shared");
  auto reader = holder->create_reader_writer_lock(name).acquire_read(10s);
  auto slot = holder->create_semaphore(name, 1).acquire(10s);
  admin->break_lock(name);
  REQUIRE(wait_until([&] { return reader.lost() && slot.lost(); }, 30s));
  auto writer = admin->create_reader_writer_lock(name).try_acquire_write(10s);
  REQUIRE(writer);
  CHECK(writer->fencing_token() > reader.fencing_token());
  auto next_slot = admin->create_semaphore(name, 1).try_acquire(10s);
  REQUIRE(next_slot);
  CHECK(next_slot->fencing_token() > slot.fencing_token());
  admin->break_lock(unique_name("inspect-break-nobody"));  // nobody holds it: nothing to do
}
