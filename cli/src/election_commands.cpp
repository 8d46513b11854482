#include "election_commands.hpp"

#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>

#include <dlock/core.hpp>

#include "backend_plugins.hpp"
#include "exit_codes.hpp"
#include "inspection_output.hpp"

namespace dlock::cli {

namespace {

std::string describe(const std::string& name, const std::optional<dlock::leader_info>& leader,
                     bool json) {
  if (json) {
    return "{\"election\":" + json_string(name) + ",\"leader\":" +
           (leader ? "{\"value\":" + json_string(leader->value) +
                         ",\"term\":" + std::to_string(leader->term) + "}"
                   : std::string("null")) +
           "}";
  }
  return leader ? std::to_string(leader->term) + " " + leader->value : std::string("none");
}

struct leader_command {
  std::string url;
  std::string name;
  bool watch = false;
  bool json = false;
};

leader_command parse_leader_command(const std::vector<std::string>& args,
                                    const std::optional<std::string>& default_url) {
  leader_command result;
  std::vector<std::string> positionals;
  for (const std::string& arg : args) {
    if (arg == "--watch") {
      result.watch = true;
    } else if (arg == "--json") {
      result.json = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw usage_error("unknown option '" + arg + "' of dlock leader");
    } else {
      positionals.push_back(arg);
    }
  }
  if (positionals.size() == 2) {
    result.url = positionals[0];
    result.name = positionals[1];
  } else if (positionals.size() == 1 && positionals[0].find("://") == std::string::npos) {
    if (!default_url || default_url->empty()) {
      throw usage_error("no URL given and DLOCK_URL is not set");
    }
    result.url = *default_url;
    result.name = positionals[0];
  } else if (positionals.size() > 2) {
    throw usage_error("too many arguments to dlock leader: '" + positionals[2] + "'");
  } else {
    throw usage_error("missing the election NAME");
  }
  return result;
}

/// Prints every leader the observation reports, one line each, until the process is ended
/// (by a signal: the default action) or the output goes away.
int watch_leader(const dlock::election& election, bool json) {
  std::mutex mutex;
  std::condition_variable output_gone;
  bool gone = false;
  dlock::leader_observation observation =
      election.observe([&](const std::optional<dlock::leader_info>& leader) {
        std::cout << describe(election.name(), leader, json) << std::endl;
        if (!std::cout) {
          std::lock_guard lock(mutex);
          gone = true;
          output_gone.notify_one();
        }
      });
  std::unique_lock lock(mutex);
  output_gone.wait(lock, [&] { return gone; });
  return 0;
}

}  // namespace

command_line parse_elect_command_line(std::vector<std::string> args,
                                      const std::optional<std::string>& default_url) {
  std::optional<std::string> value;
  for (std::size_t i = 0; i < args.size() && args[i] != "--";) {
    if (args[i] == "--value" || args[i].starts_with("--value=")) {
      const bool attached = args[i] != "--value";
      if (!attached && (i + 1 >= args.size() || args[i + 1] == "--")) {
        throw usage_error("--value needs a value");
      }
      value = attached ? args[i].substr(8) : args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                 args.begin() + static_cast<std::ptrdiff_t>(i + (attached ? 1 : 2)));
    } else {
      ++i;
    }
  }
  command_line result = parse_command_line(args, default_url);
  if (result.help || result.version) return result;
  if (result.kind != lock_kind::exclusive) {
    throw usage_error("-s, --write and --semaphore are not for dlock elect");
  }
  if (result.max_hold) throw usage_error("--max-hold is not for dlock elect");
  if (result.min_hold) throw usage_error("--min-hold is not for dlock elect");
  result.elect = true;
  result.value = std::move(value);
  return result;
}

int run_leader(const std::vector<std::string>& args,
               const std::optional<std::string>& default_url) {
  leader_command command;
  try {
    command = parse_leader_command(args, default_url);
  } catch (const usage_error& e) {
    std::cerr << "dlock: " << e.what() << "\n" << usage_text;
    return exit_usage;
  }
  try {
    auto provider = make_provider(command.url);
    dlock::election election = provider->create_election(command.name);
    if (command.watch) return watch_leader(election, command.json);
    const auto leader = election.leader();
    std::cout << describe(command.name, leader, command.json) << std::endl;
    return leader ? 0 : 1;
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n" << usage_text;
    return exit_usage;
  } catch (const dlock::error& e) {
    std::cerr << e.what() << "\n";
    return exit_unavailable;
  }
}

}  // namespace dlock::cli
