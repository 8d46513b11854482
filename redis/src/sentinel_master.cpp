#include "sentinel_master.hpp"

#include <charconv>

#include "connection.hpp"

namespace dlock::redis::detail {

namespace {

std::optional<std::uint64_t> number(const std::string& text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

sentinel_master::sentinel_master(const options& opts, std::shared_ptr<tls_client> tls)
    : name_(opts.sentinel.master_name) {
  std::string hosts;
  for (const auto& s : opts.sentinel.sentinels) {
    sentinels_.push_back(server_settings{.host = s.host,
                                         .port = s.port,
                                         .tls = tls,
                                         .user = opts.sentinel.user,
                                         .password = opts.sentinel.password,
                                         .database = 0,
                                         .command_timeout = opts.command_timeout,
                                         .client_name = opts.client_name});
    if (!hosts.empty()) hosts += ',';
    hosts += s.host + ":" + std::to_string(s.port);
  }
  endpoint_ = "sentinel " + hosts + "/" + name_;
  epoch_key_ = opts.key_prefix + "sentinel-epoch";
  data_node_ = server_settings{.tls = tls,
                               .user = opts.user,
                               .password = opts.password,
                               .database = opts.database,
                               .command_timeout = opts.command_timeout,
                               .client_name = opts.client_name};
}

std::size_t sentinel_master::sentinel_index(std::size_t n) const {
  std::lock_guard lock(mutex_);
  return (preferred_ + n) % sentinels_.size();
}

server_settings sentinel_master::master_settings(const master_address& at) const {
  server_settings settings = data_node_;
  settings.host = at.host;
  settings.port = at.port;
  return settings;
}

void sentinel_master::learned(std::size_t index, const master_address& at) {
  {
    std::lock_guard lock(mutex_);
    preferred_ = index;
    highest_epoch_ = std::max(highest_epoch_, at.epoch);
  }
  moved_to(at.host, at.port, "sentinel " + sentinels_[index].host + ":" +
                                 std::to_string(sentinels_[index].port) + " names it",
           false);
}

void sentinel_master::switched(const std::string& host, std::uint16_t port) {
  moved_to(host, port, "the sentinels announced +switch-master", true);
}

void sentinel_master::moved_to(const std::string& host, std::uint16_t port,
                               const std::string& how, bool announced) {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    const bool moved = known_ && (known_->host != host || known_->port != port);
    if (moved) {
      why = "master '" + name_ + "' moved from " + known_->host + ":" +
            std::to_string(known_->port) + " to " + host + ":" + std::to_string(port) + " (" +
            how + ")";
    }
    if (!known_ || moved) known_ = master_address{.host = host, .port = port};
  }
  if (!why.empty() && on_change_) on_change_(why, announced);
}

log_in_step sentinel_master::raise_epoch_step() const {
  constexpr const char* raise = R"lua(
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1)lua";
  return {{}, "raising the failover epoch failed", {}, [this] {
            std::uint64_t epoch;
            {
              std::lock_guard lock(mutex_);
              epoch = highest_epoch_;
            }
            return std::vector<std::string>{"EVAL", raise, "1", epoch_key_, std::to_string(epoch)};
          }};
}

namespace {

std::string refusal(const command_result& result) {
  if (result.failure) return *result.failure;
  if (result.value.is_error()) {
    return result.value.text.find("No such master") != std::string::npos
               ? "no master by this name is monitored (" + result.value.text + ")"
               : result.value.text;
  }
  return {};
}

}  // namespace

void ask_for_master(connection& link, const std::string& name, master_answer done) {
  auto address = std::make_shared<std::optional<master_address>>();
  link.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name}, [address](command_result result) {
    const auto& parts = result.value.elements;
    if (refusal(result).empty() && parts.size() == 2) {
      const auto port = number(parts[1].text);
      if (port && *port > 0 && *port <= 65535) {
        *address = master_address{.host = parts[0].text, .port = static_cast<std::uint16_t>(*port)};
      }
    }
  });
  link.command({"SENTINEL", "MASTER", name},
               [address, done = std::move(done)](command_result result) mutable {
                 std::string why = refusal(result);
                 if (why.empty() && !*address) why = "the sentinel names no address";
                 if (!why.empty()) {
                   done(std::nullopt, why);
                   return;
                 }
                 master_address at = **address;
                 std::string host;
                 std::optional<std::uint64_t> port;
                 const auto& fields = result.value.elements;
                 for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
                   const std::string& key = fields[i].text;
                   if (key == "ip") host = fields[i + 1].text;
                   if (key == "port") port = number(fields[i + 1].text);
                   if (key == "config-epoch") at.epoch = number(fields[i + 1].text).value_or(0);
                 }
                 if (host != at.host || port != at.port) ++at.epoch;  // a failover under way
                 done(at, {});
               });
}

log_in_step master_role_check() {
  return {{"ROLE"}, "not the master", [](const reply& answer) -> std::string {
            if (answer.type != reply::kind::array || answer.elements.empty()) {
              return "ROLE gave no role";
            }
            const std::string& role = answer.elements[0].text;
            return role == "master" ? std::string() : "ROLE says '" + role + "'";
          }};
}

}  // namespace dlock::redis::detail
