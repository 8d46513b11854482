#include "log_in.hpp"

#include "sentinel_master.hpp"

namespace dlock::redis::detail {

std::vector<log_in_step> log_in_steps(const server_settings& settings, bool for_subscriptions) {
  std::vector<log_in_step> steps;
  if (settings.password) {
    std::vector<std::string> auth{"AUTH"};
    if (!settings.user.empty()) auth.push_back(settings.user);
    auth.push_back(*settings.password);
    steps.push_back({std::move(auth), "authentication failed"});
  }
  if (settings.database != 0 && !for_subscriptions) {
    steps.push_back({{"SELECT", std::to_string(settings.database)},
                     "SELECT " + std::to_string(settings.database) + " failed"});
  }
  steps.push_back({{"CLIENT", "SETNAME", settings.client_name}, "CLIENT SETNAME failed"});
  if (settings.sentinel) {
    steps.push_back(master_role_check());
    if (!for_subscriptions) steps.push_back(settings.sentinel->raise_epoch_step());
  }
  return steps;
}

}  // namespace dlock::redis::detail
