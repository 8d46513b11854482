#include "url_options.hpp"

#include <set>
#include <stdexcept>
#include <string>

#include <libpq-fe.h>

namespace dlock::postgres::detail {

namespace {

// A value in a libpq key=value string: single-quoted, with \ and ' escaped.
std::string quoted(const std::string& value) {
  std::string text = "'";
  for (char c : value) {
    if (c == '\\' || c == '\'') text += '\\';
    text += c;
  }
  return text + "'";
}

std::set<std::string> libpq_keywords() {
  std::set<std::string> keywords;
  if (PQconninfoOption* defaults = PQconndefaults()) {
    for (PQconninfoOption* option = defaults; option->keyword; ++option) {
      keywords.insert(option->keyword);
    }
    PQconninfoFree(defaults);
  }
  return keywords;
}

// libpq's connect_timeout is whole seconds; dlock's duration syntax is accepted too.
std::chrono::nanoseconds parse_connect_timeout(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    if (text.size() > 6 || std::stol(text) == 0) {
      throw std::invalid_argument("dlock: postgres URL: connect_timeout '" + text +
                                  "' must be a positive number of seconds or a duration");
    }
    return std::chrono::seconds(std::stol(text));
  }
  return parse_duration("connect_timeout", text);
}

std::uint32_t parse_count(const std::string& field, const std::string& text) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument("dlock: postgres URL: " + field + " '" + text +
                                "' is not a number");
  }
  return static_cast<std::uint32_t>(std::stoul(text));
}

// The URL as a libpq key=value string; dlock's own options are taken into `opts` first.
std::string connection_string_of(provider_url& url, options& opts) {
  if (auto value = url.take_option("connect_timeout")) {
    opts.connect_timeout = parse_connect_timeout(*value);
  }
  for (auto [field, target] :
       {std::pair{"keepalive", &opts.keepalive},
        std::pair{"semaphore_retry", &opts.semaphore_retry},
        std::pair{"release_timeout", &opts.release_timeout},
        std::pair{"server_lease", &opts.server_lease},
        std::pair{"server_tcp_user_timeout", &opts.server_tcp_user_timeout},
        std::pair{"server_keepalives_idle", &opts.server_keepalives_idle},
        std::pair{"server_keepalives_interval", &opts.server_keepalives_interval}}) {
    if (auto value = url.take_option(field)) *target = parse_duration(field, *value);
  }
  if (auto value = url.take_option("fencing_sequence")) opts.fencing_sequence = *value;
  if (auto value = url.take_option("owners_table")) opts.owners_table = *value;
  for (auto [field, target] :
       {std::pair{"locks_per_session", &opts.locks_per_session},
        std::pair{"server_keepalives_count", &opts.server_keepalives_count}}) {
    if (auto value = url.take_option(field)) *target = parse_count(field, *value);
  }

  std::string hosts, ports;
  for (std::size_t i = 0; i < url.hosts.size(); ++i) {
    if (i) {
      hosts += ',';
      ports += ',';
    }
    hosts += url.hosts[i].host;
    if (url.hosts[i].port) ports += std::to_string(*url.hosts[i].port);
  }
  std::string conninfo;
  auto add = [&](const std::string& keyword, const std::string& value) {
    conninfo += (conninfo.empty() ? "" : " ") + keyword + "=" + quoted(value);
  };
  if (!hosts.empty()) add("host", hosts);
  if (ports.find_first_not_of(',') != std::string::npos) add("port", ports);
  if (url.path.size() > 1) add("dbname", url.path.substr(1));
  if (!url.user.empty()) add("user", url.user);
  if (url.password) add("password", *url.password);
  static const std::set<std::string> known = libpq_keywords();
  for (const std::string& keyword : known) {
    if (keyword == "password" || keyword == "dbname" || keyword == "host" || keyword == "port" ||
        keyword == "user") {
      continue;  // given by the URL's own parts
    }
    if (auto value = url.take_option(keyword)) add(keyword, *value);
  }
  url.reject_unknown_options();
  return conninfo;
}

}  // namespace

options options_from_url(provider_url& url) {
  options opts;
  opts.connection_string = connection_string_of(url, opts);
  return opts;
}

}  // namespace dlock::postgres::detail
