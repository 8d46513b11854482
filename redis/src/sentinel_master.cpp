#include "sentinel_master.hpp"

#include <charconv>

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

std::uint64_t sentinel_master::fencing_floor() const {
  std::lock_guard lock(mutex_);
  return highest_epoch_ << epoch_shift;
}

std::optional<master_address> read_master_reply(const command_result& result, std::string& why) {
  if (result.failure) {
    why = *result.failure;
    return std::nullopt;
  }
  if (result.value.is_error()) {
    why = result.value.text.find("No such master") != std::string::npos
              ? "no master by this name is monitored (" + result.value.text + ")"
              : result.value.text;
    return std::nullopt;
  }
  master_address at;
  std::optional<std::uint64_t> port;
  bool down = false;
  const auto& fields = result.value.elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& key = fields[i].text;
    const std::string& value = fields[i + 1].text;
    if (key == "ip") at.host = value;
    if (key == "port") port = number(value);
    if (key == "config-epoch") at.epoch = number(value).value_or(0);
    if (key == "flags") down = value.find("o_down") != std::string::npos;
  }
  if (at.host.empty() || !port || *port == 0 || *port > 65535) {
    why = "the reply to SENTINEL MASTER names no address";
    return std::nullopt;
  }
  at.port = static_cast<std::uint16_t>(*port);
  // An objectively down master is still named until the failover ends; connecting to it
  // would fail anyway, but this says why.
  if (down) {
    why = "the master " + at.host + ":" + std::to_string(at.port) +
          " is down (o_down), a failover is due";
    return std::nullopt;
  }
  return at;
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
