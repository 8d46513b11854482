#include "tls_transport.hpp"

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "log_in.hpp"
#include "stream_transport.hpp"
#include "tls_client.hpp"

namespace dlock::redis::detail {

namespace {

using tls_stream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

class tls_transport final : public stream_transport<tls_stream> {
 public:
  tls_transport(const boost::asio::any_io_executor& executor, const server_settings& settings)
      : stream_transport(executor, settings.tls->context()),
        resolver_(executor),
        settings_(settings) {}

  void async_open(open_handler done) override {
    tls_client& tls = *settings_.tls;
    if (!tls.setup_failure().empty()) {
      // Not inside this call: an open always completes later.
      boost::asio::post(resolver_.get_executor(),
                        [done = std::move(done), why = tls.setup_failure()]() mutable {
                          done("TLS set-up failed: " + why);
                        });
      return;
    }
    connect_tcp(resolver_, stream_.next_layer(), settings_.host, settings_.port,
                [this, &tls, done = std::move(done)](std::string failure) mutable {
                  if (!failure.empty()) {
                    done(std::move(failure));
                    return;
                  }
                  if (!tls.prepare(stream_.native_handle(), settings_.host)) {
                    done("TLS set-up failed: OpenSSL refused the server name");
                    return;
                  }
                  stream_.async_handshake(
                      boost::asio::ssl::stream_base::client,
                      [this, done = std::move(done)](const boost::system::error_code& error) mutable {
                        done(error ? tls_client::handshake_failure(stream_.native_handle(), error)
                                   : std::string());
                      });
                });
  }

  void close() noexcept override {
    resolver_.cancel();
    // No close_notify: the connection is being given up, and waiting for the server's
    // answer would only delay that.
    boost::system::error_code ignored;
    stream_.next_layer().close(ignored);
  }

  std::string failure_text(const boost::system::error_code& error) const override {
    if (error.category() == boost::asio::error::get_ssl_category()) return "TLS: " + error.message();
    return error.message();
  }

 private:
  boost::asio::ip::tcp::resolver resolver_;
  const server_settings& settings_;
};

}  // namespace

std::unique_ptr<transport> make_tls_transport(const boost::asio::any_io_executor& executor,
                                              const server_settings& settings) {
  return std::make_unique<tls_transport>(executor, settings);
}

}  // namespace dlock::redis::detail
