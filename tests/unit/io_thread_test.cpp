// io_thread makes Asio's reactor and its thread at the first executor(), not when it is made:
// a process out of descriptors hears why there, as a dlock::error, and can try again later.
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <future>
#include <string>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/io_thread.hpp>
#include <dlock/core/errors.hpp>

#include "support.hpp"

using Catch::Contains;

TEST_CASE("an io_thread first used with no descriptor left is a dlock::error naming the cause",
          "[core][limits]") {
#ifdef DLOCK_TESTS_UNDER_UBSAN
  // UBSan's vptr check reads memory through a pipe: in a process with no descriptor left it
  // reports every virtual call it has not seen before as an invalid vptr.
  WARN("not run under UBSan");
  return;
#endif
  support::descriptors_used_up used_up;
  std::string message;
  bool made = false;
  {
    dlock::io_thread io;  // needs no descriptor yet
    made = true;
    try {
      io.executor();
    } catch (const dlock::error& e) {
      message = e.what();
    }
    used_up.give_back();
    // With descriptors back, the same io_thread starts and runs work.
    std::promise<void> ran;
    boost::asio::post(io.executor(), [&ran] { ran.set_value(); });
    CHECK(ran.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  }
  REQUIRE(used_up.open_errno() == EMFILE);
  CHECK(made);
  CHECK_THAT(message, Contains("Too many open files") && Contains("io thread"));
}
