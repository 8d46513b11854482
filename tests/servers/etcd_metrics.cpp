#include "etcd_metrics.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <sstream>
#include <stdexcept>

namespace support {

double etcd_metric(const std::string& host_port, std::string_view series) {
  namespace http = boost::beast::http;
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    throw std::invalid_argument("etcd_metric: '" + host_port + "' is not host:port");
  }
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::beast::tcp_stream stream(io);
  http::request<http::empty_body> request(http::verb::get, "/metrics", 11);
  request.set(http::field::host, host_port);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  // Asynchronous steps, because only those keep the stream's deadline: a stopped member
  // accepts the connection and never answers.
  boost::system::error_code failed;
  stream.expires_after(std::chrono::seconds(5));
  stream.async_connect(
      resolver.resolve(host_port.substr(0, colon), host_port.substr(colon + 1)),
      [&](boost::system::error_code error, const auto&) {
        if (error) return void(failed = error);
        http::async_write(stream, request, [&](boost::system::error_code error, std::size_t) {
          if (error) return void(failed = error);
          http::async_read(stream, buffer, response,
                           [&](boost::system::error_code error, std::size_t) { failed = error; });
        });
      });
  io.run();
  if (failed) {
    throw std::runtime_error("http://" + host_port + "/metrics: " + failed.message());
  }
  if (response.result() != http::status::ok) {
    throw std::runtime_error("http://" + host_port + "/metrics answered " +
                             std::to_string(response.result_int()));
  }
  double total = 0;
  bool found = false;
  std::istringstream lines(response.body());
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(series)) continue;
    total += std::stod(line.substr(line.rfind(' ') + 1));
    found = true;
  }
  if (!found) {
    throw std::runtime_error("no series " + std::string(series) + " in http://" + host_port +
                             "/metrics");
  }
  return total;
}

}  // namespace support
