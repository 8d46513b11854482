// The plain transports: TCP (names resolved, TCP_NODELAY) and Unix sockets.
#include <boost/asio/connect.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "log_in.hpp"
#include "sentinel_master.hpp"
#include "sentinel_transport.hpp"
#include "stream_transport.hpp"
#include "tls_transport.hpp"

namespace dlock::redis::detail {

namespace {

class tcp_transport final : public stream_transport<boost::asio::ip::tcp::socket> {
 public:
  tcp_transport(const boost::asio::any_io_executor& executor, const server_settings& settings)
      : stream_transport(executor), resolver_(executor), settings_(settings) {}

  void async_open(open_handler done) override {
    connect_tcp(resolver_, stream_, settings_.host, settings_.port, std::move(done));
  }
  void close() noexcept override {
    resolver_.cancel();
    boost::system::error_code ignored;
    stream_.close(ignored);
  }
  int descriptor() noexcept override { return stream_.is_open() ? stream_.native_handle() : -1; }

 private:
  boost::asio::ip::tcp::resolver resolver_;
  const server_settings& settings_;
};

class unix_transport final : public stream_transport<boost::asio::local::stream_protocol::socket> {
 public:
  unix_transport(const boost::asio::any_io_executor& executor, const server_settings& settings)
      : stream_transport(executor), path_(settings.unix_socket) {}

  void async_open(open_handler done) override {
    stream_.async_connect(boost::asio::local::stream_protocol::endpoint(path_),
                          [done = std::move(done)](const boost::system::error_code& error) mutable {
                            done(error ? error.message() : std::string());
                          });
  }
  void close() noexcept override {
    boost::system::error_code ignored;
    stream_.close(ignored);
  }
  int descriptor() noexcept override { return stream_.is_open() ? stream_.native_handle() : -1; }

 private:
  std::string path_;
};

}  // namespace

namespace {

void connected(boost::asio::ip::tcp::socket& socket, const boost::system::error_code& error,
               transport::open_handler& done) {
  if (error) {
    done(error.message());
    return;
  }
  // Commands are small and latency matters: no Nagle delay (as hiredis does).
  boost::system::error_code ignored;
  socket.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
  done({});
}

}  // namespace

void connect_tcp(boost::asio::ip::tcp::resolver& resolver, boost::asio::ip::tcp::socket& socket,
                 const std::string& host, std::uint16_t port, transport::open_handler done) {
  // An address needs no resolver, whose one background thread would queue the connections
  // of a RedLock's nodes one behind the other.
  boost::system::error_code not_an_address;
  const auto address = boost::asio::ip::make_address(host, not_an_address);
  if (!not_an_address) {
    socket.async_connect({address, port}, [&socket, done = std::move(done)](
                                              const boost::system::error_code& error) mutable {
      connected(socket, error, done);
    });
    return;
  }
  resolver.async_resolve(
      host, std::to_string(port),
      [&socket, done = std::move(done)](
          const boost::system::error_code& error,
          boost::asio::ip::tcp::resolver::results_type results) mutable {
        if (error) {
          done("cannot resolve the host name: " + error.message());
          return;
        }
        boost::asio::async_connect(
            socket, results,
            [&socket, done = std::move(done)](const boost::system::error_code& error,
                                              const boost::asio::ip::tcp::endpoint&) mutable {
              connected(socket, error, done);
            });
      });
}

std::unique_ptr<transport> make_transport(const boost::asio::any_io_executor& executor,
                                          const server_settings& settings) {
  if (settings.sentinel) return make_sentinel_transport(executor, settings);
  if (!settings.unix_socket.empty()) return std::make_unique<unix_transport>(executor, settings);
  if (settings.tls) return make_tls_transport(executor, settings);
  return std::make_unique<tcp_transport>(executor, settings);
}

std::string endpoint_text(const server_settings& settings) {
  if (settings.sentinel) return settings.sentinel->endpoint();
  if (!settings.unix_socket.empty()) return settings.unix_socket;
  return settings.host + ":" + std::to_string(settings.port);
}

}  // namespace dlock::redis::detail
