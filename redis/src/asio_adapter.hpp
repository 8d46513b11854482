// Private to dlock::redis: hiredis's async context driven by Boost.Asio.
//
// hiredis 0.14 ships adapters for ae, glib, ivykis, libev, libevent, libuv, macosx and qt, but
// none for Asio, so this one is hand-written in the shape of adapters/libevent.h: hiredis says
// when it wants to read or write, the adapter waits for readiness on the socket with
// posix::stream_descriptor::async_wait and calls redisAsyncHandleRead/Write. No thread waits.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/any_io_executor.hpp>

struct redisAsyncContext;

namespace dlock::redis::detail {

/// Attaches `context` to `executor`. hiredis owns the adapter from then on and destroys it
/// through the cleanup hook when the context is freed (the socket itself is closed by hiredis,
/// not by the adapter). Returns false when hiredis refused the attachment.
/// Requires: `context` is not attached yet; every later use of `context` is on `executor`'s
/// thread.
bool attach_to_asio(redisAsyncContext* context, const boost::asio::any_io_executor& executor);

}  // namespace dlock::redis::detail
