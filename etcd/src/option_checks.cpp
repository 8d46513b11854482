#include "option_checks.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dlock::etcd::detail {

namespace {

[[noreturn]] void reject(std::string_view what) {
  throw std::invalid_argument("dlock: etcd provider: option " + std::string(what));
}

void require_positive(std::string_view field, std::chrono::nanoseconds value) {
  if (value <= std::chrono::nanoseconds::zero()) {
    reject("'" + std::string(field) + "' must be positive");
  }
}

}  // namespace

void validate(const options& opts) {
  if (opts.endpoints.empty()) reject("'endpoints' must not be empty");
  if (opts.endpoints.find_first_of(" /") != std::string::npos) {
    reject("'endpoints' must be host:port[,host:port...], not '" + opts.endpoints + "'");
  }
  if (!opts.prefix.empty() && opts.prefix.back() != '/') {
    reject("'prefix' must be empty or end in '/', not '" + opts.prefix + "'");
  }
  // etcd takes a lease's TTL in whole seconds, and refuses less than its minimum of about 1.5 s
  // (a TTL below that is raised silently, which would make lost signals late).
  if (opts.lease_ttl < std::chrono::seconds(2) ||
      opts.lease_ttl > std::chrono::seconds(std::numeric_limits<std::int32_t>::max()) ||
      opts.lease_ttl % std::chrono::seconds(1) != std::chrono::nanoseconds::zero()) {
    reject("'lease_ttl' must be whole seconds, at least 2s");
  }
  require_positive("connect_timeout", opts.connect_timeout);
  require_positive("release_timeout", opts.release_timeout);
  if (opts.user.empty() && !opts.password.empty()) reject("'password' needs a 'user'");
  if (!opts.tls.enabled &&
      (!opts.tls.ca_file.empty() || !opts.tls.cert_file.empty() || !opts.tls.key_file.empty())) {
    reject("'tls' files are given but tls.enabled is false");
  }
  if (opts.tls.cert_file.empty() != opts.tls.key_file.empty()) {
    reject("'tls.cert_file' and 'tls.key_file' go together");
  }
}

}  // namespace dlock::etcd::detail
