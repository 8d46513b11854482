#include <dlock/core/backend/provider_url.hpp>

#include <dlock/core/provider.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace dlock {

namespace {

[[noreturn]] void malformed(std::string_view redacted_url, const std::string& why) {
  throw std::invalid_argument("dlock: invalid provider URL '" + std::string(redacted_url) +
                              "': " + why);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text, std::string_view redacted_url,
                           std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) {
      malformed(redacted_url, "truncated %-escape in " + std::string(field));
    }
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) malformed(redacted_url, "bad %-escape in " + std::string(field));
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

/// The URL with the password (between "user:" and "@" in the authority) masked, computed
/// before parsing so that no error message can carry the password.
std::string redact_raw(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const std::size_t authority_begin = scheme_end + 3;
  const std::size_t authority_end = std::min(url.find_first_of("/?", authority_begin), url.size());
  const std::string_view authority = url.substr(authority_begin, authority_end - authority_begin);
  const std::size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  const std::size_t colon = authority.substr(0, at).find(':');
  if (colon == std::string_view::npos) return std::string(url);
  std::string redacted(url.substr(0, authority_begin + colon + 1));
  redacted += "***";
  redacted += url.substr(authority_begin + at);
  return redacted;
}

struct registry {
  std::mutex mutex;
  std::unordered_map<std::string, provider_factory> factories;
};

registry& global_registry() {
  static registry instance;
  return instance;
}

}  // namespace

provider_url provider_url::parse(std::string_view url) {
  const std::string shown = redact_raw(url);
  provider_url result;
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) {
    malformed(shown, "expected scheme://..., e.g. file:///var/lock/app or redis://host:6379");
  }
  for (char c : url.substr(0, scheme_end)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      malformed(shown, "scheme has a character other than letters, digits, '+', '-', '.'");
    }
    result.scheme.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  std::string_view rest = url.substr(scheme_end + 3);
  const std::size_t authority_end = std::min(rest.find_first_of("/?"), rest.size());
  std::string_view authority = rest.substr(0, authority_end);
  rest.remove_prefix(authority_end);

  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    const std::size_t colon = userinfo.find(':');
    result.user = percent_decode(userinfo.substr(0, colon), shown, "user");
    if (colon != std::string_view::npos) {
      result.password = percent_decode(userinfo.substr(colon + 1), shown, "password");
    }
  }
  while (!authority.empty()) {
    const std::size_t comma = std::min(authority.find(','), authority.size());
    std::string_view item = authority.substr(0, comma);
    authority.remove_prefix(std::min(comma + 1, authority.size()));
    if (item.empty()) malformed(shown, "empty host in the host list");
    host_port hp;
    std::string_view port_text;
    if (item.front() == '[') {
      const std::size_t close = item.find(']');
      if (close == std::string_view::npos) malformed(shown, "unterminated [IPv6] host");
      hp.host = std::string(item.substr(1, close - 1));
      item.remove_prefix(close + 1);
      if (!item.empty()) {
        if (item.front() != ':') malformed(shown, "expected ':' after [IPv6] host");
        port_text = item.substr(1);
      }
    } else {
      const std::size_t colon = item.find(':');
      hp.host = std::string(item.substr(0, colon));
      if (colon != std::string_view::npos) port_text = item.substr(colon + 1);
    }
    if (hp.host.empty()) malformed(shown, "empty host name");
    if (!port_text.empty() || item.ends_with(':')) {
      unsigned value = 0;
      const auto [end, ec] =
          std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
      if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
          value > 65535) {
        malformed(shown, "port '" + std::string(port_text) + "' of host '" + hp.host +
                             "' is not a number from 1 to 65535");
      }
      hp.port = static_cast<std::uint16_t>(value);
    }
    result.hosts.push_back(std::move(hp));
  }

  const std::size_t query_begin = std::min(rest.find('?'), rest.size());
  result.path = percent_decode(rest.substr(0, query_begin), shown, "path");
  std::string_view query = rest.substr(std::min(query_begin + 1, rest.size()));
  while (!query.empty()) {
    const std::size_t amp = std::min(query.find('&'), query.size());
    const std::string_view pair = query.substr(0, amp);
    query.remove_prefix(std::min(amp + 1, query.size()));
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      malformed(shown, "option '" + std::string(pair) + "' is not key=value");
    }
    std::string key = percent_decode(pair.substr(0, eq), shown, "option name");
    if (result.options.contains(key)) malformed(shown, "option '" + key + "' given twice");
    result.options.emplace(key, percent_decode(pair.substr(eq + 1), shown, "option " + key));
  }
  return result;
}

std::string provider_url::redacted() const {
  std::string out = scheme + "://";
  if (!user.empty() || password) {
    out += user;
    if (password) out += ":***";
    out += '@';
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i) out += ',';
    const bool v6 = hosts[i].host.find(':') != std::string::npos;
    out += v6 ? "[" + hosts[i].host + "]" : hosts[i].host;
    if (hosts[i].port) out += ":" + std::to_string(*hosts[i].port);
  }
  out += path;
  char separator = '?';
  for (const auto& [key, value] : options) {
    out += separator + key + "=" + value;
    separator = '&';
  }
  return out;
}

std::optional<std::string> provider_url::take_option(std::string_view key) {
  auto it = options.find(std::string(key));
  if (it == options.end()) return std::nullopt;
  std::string value = std::move(it->second);
  options.erase(it);
  return value;
}

void provider_url::reject_unknown_options() const {
  if (options.empty()) return;
  std::string names;
  for (const auto& [key, value] : options) names += (names.empty() ? "'" : ", '") + key + "'";
  throw std::invalid_argument("dlock: unknown option " + names + " in " + scheme +
                              " provider URL");
}

std::chrono::nanoseconds parse_duration(std::string_view field, std::string_view text) {
  const auto fail = [&](const std::string& why) -> std::chrono::nanoseconds {
    throw std::invalid_argument("dlock: option '" + std::string(field) + "': '" +
                                std::string(text) + "' " + why);
  };
  std::size_t unit_at = 0;
  while (unit_at < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[unit_at])) || text[unit_at] == '.')) {
    ++unit_at;
  }
  const std::string_view number = text.substr(0, unit_at);
  const std::string_view unit = text.substr(unit_at);
  if (number.empty()) return fail("is not a duration such as 30s, 250ms or 1.5s");
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) {
    return fail("is not a duration such as 30s, 250ms or 1.5s");
  }
  double scale = 0;
  if (unit == "ns") scale = 1;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "s") scale = 1e9;
  else if (unit == "m" || unit == "min") scale = 60e9;
  else if (unit == "h") scale = 3600e9;
  else return fail("needs a unit: ns, us, ms, s, m or h");
  const double nanos = std::round(value * scale);
  if (!(nanos < 9.2e18)) return fail("is too long");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(nanos));
}

bool parse_bool(std::string_view field, std::string_view text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  throw std::invalid_argument("dlock: option '" + std::string(field) + "': '" +
                              std::string(text) + "' is not true or false");
}

void register_scheme(std::string scheme, provider_factory factory) {
  auto& r = global_registry();
  std::lock_guard lock(r.mutex);
  r.factories[std::move(scheme)] = std::move(factory);
}

std::shared_ptr<provider> create_registered_provider(std::string_view url) {
  provider_url parsed = provider_url::parse(url);
  provider_factory factory;
  std::string known;
  {
    auto& r = global_registry();
    std::lock_guard lock(r.mutex);
    if (auto it = r.factories.find(parsed.scheme); it != r.factories.end()) factory = it->second;
    std::vector<std::string> names;
    for (const auto& [name, f] : r.factories) names.push_back(name + "://");
    std::sort(names.begin(), names.end());
    for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
  }
  if (!factory) {
    throw std::invalid_argument("dlock: unknown provider URL scheme '" + parsed.scheme +
                                "' in '" + redact_raw(url) + "'; this build knows " +
                                (known.empty() ? std::string("none") : known));
  }
  // Options every backend has are core's to take.
  std::optional<std::chrono::nanoseconds> max_hold;
  if (auto value = parsed.take_option("max_hold")) max_hold = parse_duration("max_hold", *value);
  std::optional<std::chrono::nanoseconds> min_hold;
  if (auto value = parsed.take_option("min_hold")) min_hold = parse_duration("min_hold", *value);
  auto owner = parsed.take_option("owner");
  if (owner) validate_owner(*owner);
  auto built = factory(std::move(parsed));
  if (max_hold) built->set_default_max_hold(*max_hold);
  if (min_hold) built->set_default_min_hold(*min_hold);
  if (owner) built->set_owner(std::move(*owner));
  return built;
}

}  // namespace dlock
