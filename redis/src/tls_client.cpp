#include "tls_client.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

namespace dlock::redis::detail {

namespace {

/// Runs one loading step; on failure records "cannot use <option> '<file>': <reason>". A file
/// that cannot be opened is said so first: OpenSSL would only say "system library".
template <typename Load>
void load(std::string& failure, const char* option, const std::string& file, Load&& step) {
  if (!failure.empty() || file.empty()) return;
  const std::string what = std::string("cannot use ") + option + " '" + file + "': ";
  if (::access(file.c_str(), R_OK) != 0) {
    failure = what + std::strerror(errno);
    return;
  }
  boost::system::error_code error;
  step(error);
  if (error) failure = what + error.message();
}

/// Initializes OpenSSL without its clean-up at exit: a provider dropped while a command was in
/// flight keeps its network thread until the reply, which may come after main() returned, and
/// OpenSSL freed under that thread's TLS connections would crash it. The operating system
/// reclaims the memory at exit anyway. Only the first initialization in a process decides: a
/// library that used OpenSSL earlier (libpq, for one) may have asked for the clean-up already.
boost::asio::ssl::context::method initialized_openssl() {
  static const bool initialized = [] {
    OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, nullptr);
    return true;
  }();
  (void)initialized;
  return boost::asio::ssl::context::tls_client;
}

}  // namespace

tls_client::tls_client(const tls_options& tls)
    : context_(initialized_openssl()),
      verify_(tls.verify),
      server_name_(tls.server_name) {
  context_.set_options(boost::asio::ssl::context::default_workarounds |
                       boost::asio::ssl::context::no_sslv2 | boost::asio::ssl::context::no_sslv3 |
                       boost::asio::ssl::context::no_tlsv1 | boost::asio::ssl::context::no_tlsv1_1);
  context_.set_verify_mode(verify_ == tls_verify::none ? boost::asio::ssl::verify_none
                                                       : boost::asio::ssl::verify_peer);
  if (tls.ca_file.empty() && tls.ca_dir.empty()) {
    boost::system::error_code error;
    context_.set_default_verify_paths(error);
    if (error) setup_failure_ = "cannot use the system's trusted CAs: " + error.message();
  }
  load(setup_failure_, "tls_ca", tls.ca_file,
       [&](auto& error) { context_.load_verify_file(tls.ca_file, error); });
  load(setup_failure_, "tls_ca_dir", tls.ca_dir,
       [&](auto& error) { context_.add_verify_path(tls.ca_dir, error); });
  load(setup_failure_, "tls_cert", tls.cert_file,
       [&](auto& error) { context_.use_certificate_chain_file(tls.cert_file, error); });
  load(setup_failure_, "tls_key", tls.key_file, [&](auto& error) {
    context_.use_private_key_file(tls.key_file, boost::asio::ssl::context::pem, error);
  });
  if (setup_failure_.empty() && !tls.cert_file.empty() &&
      SSL_CTX_check_private_key(context_.native_handle()) != 1) {
    setup_failure_ = "tls_key '" + tls.key_file + "' does not match tls_cert '" + tls.cert_file + "'";
  }
}

bool tls_client::prepare(SSL* ssl, const std::string& host) const {
  const std::string& name = server_name_.empty() ? host : server_name_;
  boost::system::error_code not_an_address;
  boost::asio::ip::make_address(name, not_an_address);
  const bool is_address = !not_an_address;
  // SNI carries host names only (RFC 6066, section 3).
  if (!is_address && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) return false;
  if (verify_ != tls_verify::full) return true;
  // OpenSSL checks the name during the handshake and reports a mismatch as the verification's
  // own error ("hostname mismatch"), unlike a verify callback that just says no.
  if (is_address) {
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  }
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, name.c_str()) == 1;
}

std::string tls_client::handshake_failure(SSL* ssl, const boost::system::error_code& error) {
  std::string text = "TLS handshake failed: " + error.message();
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK) {
    text += ": ";
    text += X509_verify_cert_error_string(verified);
  }
  return text;
}

}  // namespace dlock::redis::detail
