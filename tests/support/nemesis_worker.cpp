#include "nemesis_worker.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <thread>

#include <dlock/dlock.hpp>

#include "fenced_store.hpp"
#include "history.hpp"

namespace support {

namespace {

const char* hold_text(hold kind) {
  switch (kind) {
    case hold::lock: return "lock";
    case hold::read: return "read";
    case hold::write: return "write";
    case hold::slot: return "slot";
  }
  return "lock";
}

class worker {
 public:
  explicit worker(const nemesis_worker_args& args)
      : args_(args),
        until_(std::chrono::steady_clock::now() + std::chrono::seconds(args.seconds)),
        random_(std::random_device{}()) {
    if (args.mode.rfind("semaphore:", 0) == 0) {
      max_count_ = static_cast<std::uint32_t>(std::stoul(args.mode.substr(10)));
    } else if (args.mode != "lock" && args.mode != "rw") {
      throw std::invalid_argument("nemesis-worker: unknown mode '" + args.mode + "'");
    } else {
      store_.emplace(args.store);
    }
  }

  void run() {
    // A worker respawned during a cut meets a backend that connects in its constructor
    // (etcd's first lease, ZooKeeper's session) unreachable: it tries again, as a service would.
    while (!provider_ && running()) {
      try {
        provider_ = dlock::make_provider(args_.url);
      } catch (const dlock::error&) {
        ::usleep(50'000);
      }
    }
    while (provider_ && running()) {
      try {
        const hold kind = next_kind();
        std::optional<dlock::lock_handle> held = try_acquire(kind);
        if (!held) continue;
        work(kind, *held);
        held->release();
      } catch (const dlock::error&) {
        ::usleep(50'000);  // the backend is unreachable for now: try again, as a service would
      }
    }
  }

 private:
  bool running() const { return std::chrono::steady_clock::now() < until_; }

  hold next_kind() {
    if (max_count_) return hold::slot;
    if (args_.mode == "lock") return hold::lock;
    return random_() % 2 ? hold::read : hold::write;
  }

  std::optional<dlock::lock_handle> try_acquire(hold kind) {
    const auto wait = std::clamp<std::chrono::steady_clock::duration>(
        until_ - std::chrono::steady_clock::now(), {}, std::chrono::seconds(2));
    switch (kind) {
      case hold::lock: return provider_->create_lock(args_.name).try_acquire(wait);
      case hold::read:
        return provider_->create_reader_writer_lock(args_.name).try_acquire_read(wait);
      case hold::write:
        return provider_->create_reader_writer_lock(args_.name).try_acquire_write(wait);
      case hold::slot: return provider_->create_semaphore(args_.name, max_count_).try_acquire(wait);
    }
    return std::nullopt;
  }

  /// One critical section, logged as B on entering and S on leaving. The hold stands for the
  /// work a holder does under the lock: it is what a fault aimed at holders lands in.
  void work(hold kind, const dlock::lock_handle& held) {
    const std::uint64_t token = held.fencing_token();
    const std::string pid = std::to_string(::getpid());
    const std::int64_t begin = monotonic_ns();
    std::uniform_int_distribution<int> hold_ms(args_.hold_min_ms, args_.hold_max_ms);
    const auto hold = std::chrono::milliseconds(hold_ms(random_));
    // The section ends no earlier than `planned_end`: the nemesis aims a fault it wants
    // outlasted (a restart) at a holder with time enough left.
    const std::int64_t planned_end = begin + std::chrono::nanoseconds(hold).count();
    append_history_line(args_.log, "B " + pid + " " + std::to_string(token) + " " +
                                       std::to_string(begin) + " " + hold_text(kind) + " " +
                                       std::to_string(planned_end));
    std::string read = "-", write = "-";
    std::optional<std::int64_t> value;
    if (kind == hold::lock || kind == hold::write) {
      value = store_->read(token);
      read = value ? std::to_string(*value) : "-1";
    }
    std::this_thread::sleep_for(hold);
    if (value) write = store_->write(token, *value + 1) ? "1" : "0";
    if (kind == hold::read) {
      value = store_->read_shared(token);
      read = value ? std::to_string(*value) : "-1";
    }
    const bool lost = held.lost();
    const std::int64_t end = monotonic_ns();
    append_history_line(args_.log, "S " + pid + " " + std::to_string(token) + " " +
                                       std::to_string(begin) + " " + std::to_string(end) + " " +
                                       read + " " + write + " " + (lost ? "1 " : "0 ") +
                                       hold_text(kind));
  }

  nemesis_worker_args args_;
  std::chrono::steady_clock::time_point until_;
  std::mt19937 random_;
  std::uint32_t max_count_ = 0;
  std::optional<fenced_store> store_;
  std::shared_ptr<dlock::provider> provider_;
};

}  // namespace

int run_nemesis_worker(const nemesis_worker_args& args) {
  worker(args).run();
  return 0;
}

}  // namespace support
