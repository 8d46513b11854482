// Private to dlock::redis: the provider's TLS set-up, one OpenSSL context shared by every
// connection (async and blocking, on any thread: OpenSSL's contexts are safe to share once
// configured).
#pragma once

#include <string>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

#include <dlock/redis/options.hpp>

namespace dlock::redis::detail {

/// The TLS client side of a provider: the CA to trust, the client certificate, what to verify.
class tls_client {
 public:
  /// Loads the files `tls` names. A file that cannot be used does not throw: it is recorded,
  /// and every connection then fails with setup_failure(), a connection_error like any other
  /// refusal (an option's *value* was checked by validated()).
  explicit tls_client(const tls_options& tls);

  /// Why no connection can be made ("cannot use tls_cert '/etc/x.pem': No such file or
  /// directory"), or empty.
  const std::string& setup_failure() const noexcept { return setup_failure_; }
  boost::asio::ssl::context& context() noexcept { return context_; }

  /// Prepares the session `ssl` for a server reached as `host`: SNI (a name, not an address),
  /// and with tls_verify::full the host name or IP address the certificate must be for.
  /// Returns false when OpenSSL refused (out of memory).
  bool prepare(SSL* ssl, const std::string& host) const;

  /// Why the handshake of `ssl` failed with `error`: OpenSSL's reason and, when the
  /// certificate was the cause, the verification's ("certificate has expired", "hostname
  /// mismatch", "unable to get local issuer certificate").
  static std::string handshake_failure(SSL* ssl, const boost::system::error_code& error);

 private:
  boost::asio::ssl::context context_;
  tls_verify verify_;
  std::string server_name_;
  std::string setup_failure_;
};

}  // namespace dlock::redis::detail
