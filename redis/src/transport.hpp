// Private to dlock::redis: the byte stream under every connection of the backend, whatever
// carries it (TCP, TLS over TCP, a Unix socket). The connection formats commands and parses
// replies (RESP) itself, so each way of reaching a server is only this much.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include <dlock/core/detail/unique_function.hpp>

namespace dlock::redis::detail {

struct server_settings;

/// One connection's stream. Operations complete on the executor it was made with, never inside
/// the initiating call; at most one open, one write and one read are outstanding at a time.
///
/// Lifetime: a pending operation's handler keeps no reference to the transport; its owner
/// keeps the transport (and the buffers) alive until the handler ran or the executor stopped.
class transport {
 public:
  /// Completes an open: empty on success, otherwise why it failed ("connection refused",
  /// "TLS handshake failed: certificate verify failed: certificate has expired").
  using open_handler = dlock::detail::unique_function<void(std::string failure)>;
  using io_handler = dlock::detail::unique_function<void(const boost::system::error_code&,
                                                         std::size_t)>;

  virtual ~transport() = default;

  /// Resolves and connects (and for TLS, shakes hands and verifies the server).
  virtual void async_open(open_handler done) = 0;
  /// Writes all of `bytes`. Requires: `bytes` stays valid until `done` ran.
  virtual void async_write(boost::asio::const_buffer bytes, io_handler done) = 0;
  /// Reads what is there (at least one byte) into `into`.
  virtual void async_read_some(boost::asio::mutable_buffer into, io_handler done) = 0;
  /// Closes at once; pending operations complete with operation_aborted.
  virtual void close() noexcept = 0;
  /// The open socket's descriptor, for a caller that writes and reads it directly (a blocking
  /// command, connection::command_now), or -1 when the bytes on it are not the stream's own
  /// (TLS) or it is not open.
  virtual int descriptor() noexcept { return -1; }
  /// Words for a failed read or write, e.g. "end of file" or "TLS: tlsv13 alert certificate
  /// required".
  virtual std::string failure_text(const boost::system::error_code& error) const {
    return error.message();
  }
};

/// The transport `settings` ask for: a Unix socket, TLS or plain TCP.
std::unique_ptr<transport> make_transport(const boost::asio::any_io_executor& executor,
                                          const server_settings& settings);

/// The endpoint of `settings` for messages: "host:port", or the socket's path.
std::string endpoint_text(const server_settings& settings);

}  // namespace dlock::redis::detail
