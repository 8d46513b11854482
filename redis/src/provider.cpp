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

}  // namespace

void register_scheme() {
  dlock::register_scheme("redis", [](provider_url url) -> std::shared_ptr<dlock::provider> {
    if (url.hosts.empty()) {
      throw std::invalid_argument("dlock: redis URL '" + url.redacted() +
                                  "' names no host; use redis://host:6379");
    }
    options opts;
    for (const auto& host : url.hosts) {
      opts.servers.push_back(server{.host = host.host, .port = host.port.value_or(6379)});
    }
    opts.user = url.user;
    opts.password = url.password;
    opts.database = parse_database(url);
    if (auto value = url.take_option("expiry")) opts.expiry = parse_duration("expiry", *value);
    if (auto value = url.take_option("extend_every")) {
      opts.extend_every = parse_duration("extend_every", *value);
    }
    if (auto value = url.take_option("command_timeout")) {
      opts.command_timeout = parse_duration("command_timeout", *value);
    }
    if (auto value = url.take_option("release_timeout")) {
      opts.release_timeout = parse_duration("release_timeout", *value);
    }
    if (auto value = url.take_option("prefix")) opts.key_prefix = *value;
    if (auto value = url.take_option("client_name")) opts.client_name = *value;
    if (auto value = url.take_option("plain_keys")) {
      opts.plain_keys = parse_bool("plain_keys", *value);
    }
    url.reject_unknown_options();
    return std::make_shared<provider>(std::move(opts));
  });
}

}  // namespace dlock::redis
