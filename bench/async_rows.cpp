// The async rows every backend benchmark prints: async_acquire beside the blocking call, and
// many async waiters on one name (bench_support.hpp).
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>  // before awaitable.hpp, which uses std::exchange without it (Boost 1.74)

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bench_support.hpp"

namespace dlock_bench {

namespace {

double since_us(std::int64_t started) { return (now_ns() - started) / 1000.0; }

// async_acquire with a plain callback bound to an io_context this thread runs, as an
// application's event loop would; the handle is released in the callback.
double callback_cycle(dlock::distributed_lock& lock, boost::asio::io_context& context) {
  const auto started = now_ns();
  double sample = 0;
  lock.async_acquire(dlock::forever, {},
                     boost::asio::bind_executor(
                         context, [&](std::exception_ptr error, dlock::lock_handle handle) {
                           if (error) std::rethrow_exception(error);
                           handle.release();
                           sample = since_us(started);
                         }));
  context.restart();
  context.run();
  return sample;
}

// async_acquire with use_awaitable, in a coroutine on an io_context this thread runs.
double awaitable_cycle(dlock::distributed_lock& lock, boost::asio::io_context& context) {
  double sample = 0;
  boost::asio::co_spawn(
      context,
      [&]() -> boost::asio::awaitable<void> {
        const auto started = now_ns();
        dlock::lock_handle handle =
            co_await lock.async_acquire(dlock::forever, {}, boost::asio::use_awaitable);
        handle.release();
        sample = since_us(started);
      },
      [](std::exception_ptr error) {
        if (error) std::rethrow_exception(error);
      });
  context.restart();
  context.run();
  return sample;
}

// Asio's own share of an async call: an operation that does nothing but post its completion
// to the handler's executor (as dlock's settled acquire does), with a callback or co_awaited,
// run the same way as the two cycles above. Their excess over nothing is the floor any
// asynchronous acquire pays in this event loop, whatever the library.
template <typename Token>
auto posted_nothing(Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr)>(
      [](auto handler) {
        auto executor = boost::asio::get_associated_executor(handler);
        boost::asio::post(executor,
                          [handler = std::move(handler)]() mutable { std::move(handler)(nullptr); });
      },
      token);
}

double callback_floor(boost::asio::io_context& context) {
  const auto started = now_ns();
  double sample = 0;
  posted_nothing(boost::asio::bind_executor(context, [&](std::exception_ptr) {
    sample = since_us(started);
  }));
  context.restart();
  context.run();
  return sample;
}

// The time from a coroutine's first step to the end of a co_await of `awaited()`.
template <typename Awaited>
double coroutine_floor(boost::asio::io_context& context, Awaited awaited) {
  double sample = 0;
  boost::asio::co_spawn(
      context,
      [&]() -> boost::asio::awaitable<void> {
        const auto started = now_ns();
        co_await awaited();
        sample = since_us(started);
      },
      boost::asio::detached);
  context.restart();
  context.run();
  return sample;
}

double awaitable_floor(boost::asio::io_context& context) {
  return coroutine_floor(context, [] { return posted_nothing(boost::asio::use_awaitable); });
}

// The floor of a use_awaitable acquire that settles at once (file, memory): a co_await of a
// nested awaitable that returns without suspending, as dlock's does.
boost::asio::awaitable<int> returns_at_once() { co_return 1; }

double nested_floor(boost::asio::io_context& context) {
  return coroutine_floor(context, returns_at_once);
}

}  // namespace

void print_async_rows(const std::string& url, int iterations) {
  auto provider = dlock::make_provider(url);
  dlock::distributed_lock lock = provider->create_lock("async-uncontended");
  boost::asio::io_context context;
  std::vector<double> blocking, callback, awaitable, asio_callback, asio_awaitable, asio_nested;
  for (int i = -iterations / 10; i < iterations; ++i) {  // the first tenth warms up
    const double samples[] = {uncontended(lock, 1).front(), callback_cycle(lock, context),
                              awaitable_cycle(lock, context), callback_floor(context),
                              awaitable_floor(context), nested_floor(context)};
    if (i < 0) continue;
    blocking.push_back(samples[0]);
    callback.push_back(samples[1]);
    awaitable.push_back(samples[2]);
    asio_callback.push_back(samples[3]);
    asio_awaitable.push_back(samples[4]);
    asio_nested.push_back(samples[5]);
  }
  const auto sync = summarize(blocking);
  const auto by_callback = summarize(callback);
  const auto by_coroutine = summarize(awaitable);
  const auto floor_callback = summarize(asio_callback);
  const auto floor_coroutine = summarize(asio_awaitable);
  const auto floor_nested = summarize(asio_nested);
  print_row("blocking acquire() + release (interleaved)", sync, blocking.size());
  print_row("async_acquire, callback, + release", by_callback, callback.size());
  print_row("async_acquire, use_awaitable, + release", by_coroutine, awaitable.size());
  print_row("Asio floor: a posted completion, callback", floor_callback, asio_callback.size());
  print_row("Asio floor: a posted completion, awaitable", floor_coroutine, asio_awaitable.size());
  print_row("Asio floor: a nested awaitable, no suspension", floor_nested, asio_nested.size());
  std::printf("%-44s median %9.2fx / %.2fx\n", "async / blocking (callback / awaitable)",
              by_callback.median_us / sync.median_us, by_coroutine.median_us / sync.median_us);
  // What dlock adds to Asio's floor: the async call less the blocking call and the floor. A
  // use_awaitable acquire that settles at once pays the nested floor; one that waits, the posted.
  std::printf("%-44s median %9.2f us / %.2f us / %.2f us\n",
              "dlock's own async cost (callback / awaitable over posted / over nested)",
              by_callback.median_us - sync.median_us - floor_callback.median_us,
              by_coroutine.median_us - sync.median_us - floor_coroutine.median_us,
              by_coroutine.median_us - sync.median_us - floor_nested.median_us);
}

void print_async_waiters(const std::string& url, int waiters) {
  auto provider = dlock::make_provider(url);
  dlock::distributed_lock lock = provider->create_lock("async-waiters");
  dlock::lock_handle held = lock.acquire();
  const std::size_t heap_before = heap_in_use();
  const long rss_before = status_field("VmRSS:");
  const long threads_before = status_field("Threads:");
  std::stop_source stop;
  std::mutex mutex;
  std::condition_variable all_done;
  int done = 0, granted = 0;
  const auto started = now_ns();
  for (int i = 0; i < waiters; ++i) {
    lock.async_try_acquire(dlock::forever, stop.get_token(),
                           [&](std::exception_ptr, std::optional<dlock::lock_handle> handle) {
                             std::lock_guard guard(mutex);
                             if (handle) ++granted;
                             ++done;
                             all_done.notify_one();
                           });
  }
  const double start_ms = since_us(started) / 1000;
  const std::size_t heap_waiting = heap_in_use();
  const long rss_waiting = status_field("VmRSS:");
  const long threads_waiting = status_field("Threads:");
  const auto stopping = now_ns();
  stop.request_stop();
  {
    std::unique_lock guard(mutex);
    all_done.wait(guard, [&] { return done == waiters; });
  }
  const double stop_ms = since_us(stopping) / 1000;
  std::printf("%d async waiters on one name: %.0f bytes of heap each (%.0f resident), threads "
              "%ld -> %ld, %.1f ms to start, all stopped in %.1f ms (%d granted)\n",
              waiters, (static_cast<double>(heap_waiting) - heap_before) / waiters,
              (rss_waiting - rss_before) * 1024.0 / waiters, threads_before, threads_waiting,
              start_ms, stop_ms, granted);
}

}  // namespace dlock_bench
