#include <dlock/redis/provider.hpp>

#include <charconv>
#include <stdexcept>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"

namespace dlock::redis {

namespace {

std::shared_ptr<detail::redis_backend> make_backend(const options& opts) {
  return std::make_shared<detail::redis_backend>(opts);
}

}  // namespace

provider::provider(options opts) : provider(make_backend(opts), opts.on_error) {}

provider::provider(std::shared_ptr<detail::redis_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

std::string provider::lock_key(std::string_view name) const {
  naming::validate_name(name);
  return backend_->lock_key(name);
}

namespace {

int parse_database(const provider_url& url) {
  if (url.path.empty() || url.path == "/") return 0;
  const std::string text = url.path.substr(1);
  int database = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), database);
  if (error != std::errc() || end != text.data() + text.size() || database < 0) {
    throw std::invalid_argument("dlock: redis URL '" + url.redacted() + "': database '" + text +
                                "' is not a number (redis://host:port/0)");
  }
  return database;
}

tls_verify parse_tls_verify(const std::string& text) {
  if (text == "full") return tls_verify::full;
  if (text == "ca") return tls_verify::ca;
  if (text == "none") return tls_verify::none;
  throw std::invalid_argument("dlock: redis URL option tls_verify must be full, ca or none, not '" +
                              text + "'");
}

void take_tls_options(provider_url& url, tls_options& tls) {
  if (auto value = url.take_option("tls_ca")) tls.ca_file = *value;
  if (auto value = url.take_option("tls_ca_dir")) tls.ca_dir = *value;
  if (auto value = url.take_option("tls_cert")) tls.cert_file = *value;
  if (auto value = url.take_option("tls_key")) tls.key_file = *value;
  if (auto value = url.take_option("tls_server_name")) tls.server_name = *value;
  if (auto value = url.take_option("tls_verify")) tls.verify = parse_tls_verify(*value);
}

/// The servers of a redis:// or rediss:// URL (several: RedLock), or of a redis+unix:// URL
/// (its path), and the database (the path of the first, an option of the second).
void take_servers(provider_url& url, options& opts) {
  if (url.scheme == "redis+unix") {
    if (!url.hosts.empty() || url.path.empty() || url.path == "/") {
      throw std::invalid_argument("dlock: redis URL '" + url.redacted() +
                                  "' names no socket; use redis+unix:///run/redis/redis.sock");
    }
    opts.servers.push_back(server{.host = {}, .unix_socket = url.path});
    if (auto value = url.take_option("database")) {
      provider_url database_path = url;
      database_path.path = "/" + *value;
      opts.database = parse_database(database_path);
    }
    return;
  }
  if (url.hosts.empty()) {
    throw std::invalid_argument("dlock: redis URL '" + url.redacted() + "' names no host; use " +
                                url.scheme + "://host:6379");
  }
  for (const auto& host : url.hosts) {
    opts.servers.push_back(server{.host = host.host, .port = host.port.value_or(6379)});
  }
  opts.database = parse_database(url);
}

void take_duration(provider_url& url, std::string_view key, std::chrono::nanoseconds& into) {
  if (auto value = url.take_option(key)) into = parse_duration(key, *value);
}

/// redis+sentinel://[user:password@]s1[:26379][,s2...]/master_name[?options] (rediss+sentinel
/// over TLS): the user and password are the data nodes'; sentinel_user, sentinel_password,
/// database, wait_replicas and wait_timeout are options.
void take_sentinel(provider_url& url, options& opts) {
  const std::string name = url.path.size() > 1 ? url.path.substr(1) : std::string();
  if (url.hosts.empty() || name.empty() || name.find('/') != std::string::npos) {
    throw std::invalid_argument("dlock: redis URL '" + url.redacted() +
                                "' must name the sentinels and the master: " + url.scheme +
                                "://s1:26379,s2:26379,s3:26379/mymaster");
  }
  opts.sentinel.master_name = name;
  for (const auto& host : url.hosts) {
    opts.sentinel.sentinels.push_back(server{.host = host.host, .port = host.port.value_or(26379)});
  }
  if (auto value = url.take_option("sentinel_user")) opts.sentinel.user = *value;
  if (auto value = url.take_option("sentinel_password")) opts.sentinel.password = *value;
  if (auto value = url.take_option("database")) {
    provider_url database_path = url;
    database_path.path = "/" + *value;
    opts.database = parse_database(database_path);
  }
  if (auto value = url.take_option("wait_replicas")) {
    int replicas = -1;
    const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), replicas);
    if (error != std::errc() || end != value->data() + value->size() || replicas < 0) {
      throw std::invalid_argument("dlock: redis URL option wait_replicas must be a number >= 0, not '" +
                                  *value + "'");
    }
    opts.sentinel.wait_replicas = replicas;
  }
  take_duration(url, "wait_timeout", opts.sentinel.wait_timeout);
}

bool sentinel_scheme(const provider_url& url) { return url.scheme.ends_with("+sentinel"); }

std::shared_ptr<dlock::provider> make_from_url(provider_url url) {
  options opts;
  if (sentinel_scheme(url)) {
    take_sentinel(url, opts);
  } else {
    take_servers(url, opts);
  }
  opts.tls.enabled = url.scheme.starts_with("rediss");
  opts.cluster = url.scheme.ends_with("+cluster");
  take_tls_options(url, opts.tls);
  opts.user = url.user;
  opts.password = url.password;
  take_duration(url, "expiry", opts.expiry);
  take_duration(url, "extend_every", opts.extend_every);
  take_duration(url, "command_timeout", opts.command_timeout);
  take_duration(url, "release_timeout", opts.release_timeout);
  if (auto value = url.take_option("prefix")) opts.key_prefix = *value;
  if (auto value = url.take_option("client_name")) opts.client_name = *value;
  if (auto value = url.take_option("plain_keys")) {
    opts.plain_keys = parse_bool("plain_keys", *value);
  }
  if (auto value = url.take_option("layout")) {
    if (*value == "dlock") {
      opts.layout = key_layout::dlock;
    } else if (*value == "dotnet") {
      opts.layout = key_layout::dotnet;
    } else {
      throw std::invalid_argument("dlock: redis URL option layout must be 'dlock' or 'dotnet', not '" +
                                  *value + "'");
    }
  }
  url.reject_unknown_options();
  return std::make_shared<provider>(std::move(opts));
}

}  // namespace

void register_scheme() {
  dlock::register_scheme("redis", &make_from_url);
  dlock::register_scheme("rediss", &make_from_url);
  dlock::register_scheme("redis+unix", &make_from_url);
  dlock::register_scheme("redis+sentinel", &make_from_url);
  dlock::register_scheme("rediss+sentinel", &make_from_url);
  dlock::register_scheme("redis+cluster", &make_from_url);
  dlock::register_scheme("rediss+cluster", &make_from_url);
}

}  // namespace dlock::redis
