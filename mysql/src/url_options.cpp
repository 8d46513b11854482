#include "url_options.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

namespace dlock::mysql::detail {

namespace {

std::string invalid(const std::string& what) { return "dlock: mysql URL: " + what; }

// MariaDB's option files spell ssl-ca, its C API ssl_ca: both are taken.
void normalize_option_names(provider_url& url) {
  std::map<std::string, std::string> renamed;
  for (auto& [key, value] : url.options) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '-', '_');
    if (renamed.contains(name)) throw std::invalid_argument(invalid("option " + name + " given twice"));
    renamed.emplace(std::move(name), value);
  }
  url.options = std::move(renamed);
}

// ssl_mode as MySQL's clients name it.
void apply_ssl_mode(std::string mode, tls_options& tls) {
  std::transform(mode.begin(), mode.end(), mode.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (mode == "DISABLED") {
    tls.enabled = false;
    tls.verify_server_cert = false;
  } else if (mode == "PREFERRED" || mode == "REQUIRED") {
    tls.enabled = mode == "REQUIRED";
    tls.verify_server_cert = false;
  } else if (mode == "VERIFY_CA" || mode == "VERIFY_IDENTITY") {
    tls.enabled = true;
    tls.verify_server_cert = true;
  } else {
    throw std::invalid_argument(invalid("ssl_mode '" + mode +
                                        "' is not DISABLED, PREFERRED, REQUIRED, VERIFY_CA or "
                                        "VERIFY_IDENTITY"));
  }
}

}  // namespace

options options_from_url(provider_url& url) {
  options opts;
  if (url.hosts.size() > 1) {
    throw std::invalid_argument(invalid("one host only (" + url.redacted() + ")"));
  }
  if (!url.hosts.empty()) {
    opts.host = url.hosts.front().host;
    if (url.hosts.front().port) opts.port = *url.hosts.front().port;
  }
  opts.user = url.user;
  opts.password = url.password.value_or("");
  if (url.path.size() > 1) opts.database = url.path.substr(1);
  if (opts.database.find('/') != std::string::npos) {
    throw std::invalid_argument(invalid("database '" + opts.database + "' contains '/'"));
  }
  normalize_option_names(url);
  for (auto [field, target] : {std::pair{"connect_timeout", &opts.connect_timeout},
                               std::pair{"keepalive", &opts.keepalive},
                               std::pair{"server_lease", &opts.server_lease},
                               std::pair{"semaphore_retry", &opts.semaphore_retry},
                               std::pair{"release_timeout", &opts.release_timeout}}) {
    if (auto value = url.take_option(field)) *target = parse_duration(field, *value);
  }
  if (auto value = url.take_option("fencing_sequence")) opts.fencing_sequence = *value;
  if (auto value = url.take_option("semaphore_table")) opts.semaphore_table = *value;
  if (auto value = url.take_option("election_table")) opts.election_table = *value;
  if (auto value = url.take_option("grant_table")) opts.grant_table = *value;
  if (auto value = url.take_option("socket")) opts.host = *value;
  if (auto value = url.take_option("ssl")) opts.tls.enabled = parse_bool("ssl", *value);
  if (auto value = url.take_option("ssl_mode")) apply_ssl_mode(*value, opts.tls);
  if (auto value = url.take_option("ssl_verify_server_cert")) {
    opts.tls.verify_server_cert = parse_bool("ssl_verify_server_cert", *value);
  }
  for (auto [field, target] : {std::pair{"ssl_ca", &opts.tls.ca},
                               std::pair{"ssl_cert", &opts.tls.cert},
                               std::pair{"ssl_key", &opts.tls.key}}) {
    if (auto value = url.take_option(field)) *target = *value;
  }
  url.reject_unknown_options();
  return opts;
}

}  // namespace dlock::mysql::detail
