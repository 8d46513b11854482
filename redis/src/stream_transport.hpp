// Private to dlock::redis: what the transports over Asio streams share.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "transport.hpp"

namespace dlock::redis::detail {

/// Reading and writing are the same for every socket type (and for an ssl::stream).
template <typename Stream>
class stream_transport : public transport {
 public:
  template <typename... Args>
  explicit stream_transport(Args&&... args) : stream_(std::forward<Args>(args)...) {}

  void async_write(boost::asio::const_buffer bytes, io_handler done) override {
    boost::asio::async_write(stream_, bytes, std::move(done));
  }
  void async_read_some(boost::asio::mutable_buffer into, io_handler done) override {
    stream_.async_read_some(into, std::move(done));
  }

 protected:
  Stream stream_;
};

/// Resolves `host` and connects `socket` to the first address that accepts, with TCP_NODELAY.
/// Requires: `resolver` and `socket` outlive `done`'s call.
void connect_tcp(boost::asio::ip::tcp::resolver& resolver, boost::asio::ip::tcp::socket& socket,
                 const std::string& host, std::uint16_t port, transport::open_handler done);

}  // namespace dlock::redis::detail
