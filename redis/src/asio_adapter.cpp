#include "asio_adapter.hpp"

#include <memory>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <hiredis/async.h>

namespace dlock::redis::detail {

namespace {

/// Shared by the adapter and its pending waits: a wait that completes after hiredis freed the
/// context (cleanup) finds `context` null and does nothing.
struct asio_adapter : std::enable_shared_from_this<asio_adapter> {
  asio_adapter(redisAsyncContext* context, const boost::asio::any_io_executor& executor)
      : context(context), socket(executor, context->c.fd) {}

  redisAsyncContext* context;
  boost::asio::posix::stream_descriptor socket;
  bool reading = false;
  bool writing = false;
  bool read_waiting = false;
  bool write_waiting = false;
  /// Keeps the adapter alive while hiredis holds it (ev.data); dropped by cleanup.
  std::shared_ptr<asio_adapter> self;

  /// Waits until the socket is ready for `direction`, then lets hiredis read or write, and
  /// waits again while hiredis still wants to.
  void wait_until_ready(boost::asio::posix::stream_descriptor::wait_type direction) {
    const bool read = direction == boost::asio::posix::stream_descriptor::wait_read;
    bool& waiting = read ? read_waiting : write_waiting;
    if (waiting || !context) return;
    waiting = true;
    socket.async_wait(direction, [keep = shared_from_this(), direction,
                                  read](const boost::system::error_code&) {
      (read ? keep->read_waiting : keep->write_waiting) = false;
      const bool& wanted = read ? keep->reading : keep->writing;
      if (!keep->context || !wanted) return;
      (read ? redisAsyncHandleRead : redisAsyncHandleWrite)(keep->context);
      // The context may have been freed inside; cleanup cleared it then.
      if (keep->context && wanted) keep->wait_until_ready(direction);
    });
  }

  static asio_adapter& of(void* data) { return *static_cast<asio_adapter*>(data); }

  static void add_read(void* data) {
    auto& adapter = of(data);
    adapter.reading = true;
    adapter.wait_until_ready(boost::asio::posix::stream_descriptor::wait_read);
  }
  static void del_read(void* data) { of(data).reading = false; }
  static void add_write(void* data) {
    auto& adapter = of(data);
    adapter.writing = true;
    adapter.wait_until_ready(boost::asio::posix::stream_descriptor::wait_write);
  }
  static void del_write(void* data) { of(data).writing = false; }
  static void cleanup(void* data) {
    auto& adapter = of(data);
    adapter.context = nullptr;
    adapter.reading = adapter.writing = false;
    // hiredis closes the socket; the descriptor must only let go of it. release() also
    // cancels the pending waits, whose handlers then see the null context.
    adapter.socket.release();
    auto keep = std::move(adapter.self);  // may destroy the adapter when this returns
  }
};

}  // namespace

bool attach_to_asio(redisAsyncContext* context, const boost::asio::any_io_executor& executor) {
  if (context->ev.data != nullptr) return false;
  auto adapter = std::make_shared<asio_adapter>(context, executor);
  adapter->self = adapter;
  context->ev.addRead = &asio_adapter::add_read;
  context->ev.delRead = &asio_adapter::del_read;
  context->ev.addWrite = &asio_adapter::add_write;
  context->ev.delWrite = &asio_adapter::del_write;
  context->ev.cleanup = &asio_adapter::cleanup;
  context->ev.data = adapter.get();
  return true;
}

}  // namespace dlock::redis::detail
