// dlock ls, inspect and break (inspect_commands.hpp): parse, ask the provider, print.
#include "inspect_commands.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <thread>

#include <dlock/core.hpp>
#include <dlock/core/backend/provider_url.hpp>

#include "backend_plugins.hpp"
#include "command_line.hpp"
#include "exit_codes.hpp"
#include "inspection_output.hpp"

namespace dlock::cli {

namespace {

const char* const inspect_usage =
    "usage: dlock ls [URL] [PREFIX] [--json] [--stale DURATION] [--watch]\n"
    "       dlock inspect [URL] NAME [--json]\n"
    "       dlock break [URL] NAME [--yes]\n";

const char* const inspect_help =
    "ls lists the locks held under PREFIX, held longest first: for how long, how many hold\n"
    "and wait, the oldest holder's token and owner. --stale DURATION (30s, 5m) lists only\n"
    "those held at least that long; --watch redraws the list every 2 seconds until\n"
    "interrupted. inspect shows one name's holders and waiters. break frees NAME behind its\n"
    "holders' backs and fences them out (their handles are lost, the next token is higher);\n"
    "on a terminal it asks first, --yes does not ask (and is needed when stdin is not a\n"
    "terminal). Without URL, $DLOCK_URL is used.\n"
    "exit status: 0 done; 1 break declined; 64 usage error; 69 backend unreachable, failing,\n"
    "or unable to inspect. Details: docs/cli.md.\n";

struct inspect_args {
  std::string command;
  std::string url;
  std::string name;  // NAME, or ls's PREFIX
  bool json = false;
  bool yes = false;
  std::optional<std::chrono::nanoseconds> stale;
  std::optional<std::chrono::nanoseconds> watch;
};

inspect_args parse(const std::vector<std::string>& args) {
  inspect_args result{.command = args[0]};
  std::vector<std::string> positionals;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](const std::string& option) {
      if (i + 1 >= args.size()) throw usage_error(option + " needs a value");
      return args[++i];
    };
    if (arg == "--json" && result.command != "break") {
      result.json = true;
    } else if (arg == "--yes" && result.command == "break") {
      result.yes = true;
    } else if (arg == "--stale" && result.command == "ls") {
      result.stale = dlock::parse_duration("--stale", value(arg));
    } else if (arg == "--watch" && result.command == "ls") {
      result.watch = std::chrono::seconds(2);
    } else if (arg == "-h" || arg == "--help") {
      result.command = "help";
      return result;
    } else if (arg.starts_with("-") && arg.size() > 1) {
      throw usage_error("unknown option '" + arg + "' for dlock " + result.command);
    } else {
      positionals.push_back(arg);
    }
  }
  result.url = take_url(positionals);
  const std::size_t wanted = result.command == "ls" ? 0 : 1;
  if (positionals.size() < wanted) throw usage_error("missing the lock NAME");
  if (positionals.size() > 1) throw usage_error("too many arguments: '" + positionals[1] + "'");
  if (!positionals.empty()) result.name = positionals[0];
  return result;
}

std::vector<lock_inspection> stale_only(std::vector<lock_inspection> locks,
                                        std::optional<std::chrono::nanoseconds> stale,
                                        std::chrono::system_clock::time_point now) {
  if (!stale) return locks;
  std::erase_if(locks, [&](const lock_inspection& found) {
    const auto since = found.held_since();
    return !since || now - *since < *stale;
  });
  return locks;
}

int list(dlock::provider& locks, const inspect_args& args) {
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  for (;;) {
    const auto now = std::chrono::system_clock::now();
    const auto found = stale_only(locks.list_locks(args.name), args.stale, now);
    if (args.watch && terminal) std::cout << "\033[H\033[2J";
    std::cout << (args.json ? to_json(found, now) + "\n" : ls_table(found, now)) << std::flush;
    if (!args.watch) return 0;
    std::this_thread::sleep_for(*args.watch);
  }
}

bool confirmed(const lock_inspection& found) {
  std::cerr << inspect_screen(found, std::chrono::system_clock::now())
            << "break lock '" << found.name << "'? Its holders lose it. [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

int run(const inspect_args& args) {
  // A script that forgot --yes must not break a lock nobody agreed to break.
  if (args.command == "break" && !args.yes && ::isatty(STDIN_FILENO) != 1) {
    throw usage_error("break asks before it frees a lock, and stdin is not a terminal to ask "
                      "on: add --yes to break '" + args.name + "' without asking");
  }
  const auto locks = make_provider(args.url);
  if (args.command == "ls") return list(*locks, args);
  if (args.command == "inspect") {
    const auto found = locks->inspect(args.name);
    const auto now = std::chrono::system_clock::now();
    std::cout << (args.json ? to_json(found, now) + "\n" : inspect_screen(found, now));
    return 0;
  }
  if (!args.yes && !confirmed(locks->inspect(args.name))) {
    std::cerr << "dlock: not broken\n";
    return 1;
  }
  locks->break_lock(args.name);
  std::cerr << "dlock: broke '" << args.name << "' at " << locks->scheme() << " "
            << locks->endpoint() << "\n";
  return 0;
}

}  // namespace

std::optional<int> run_inspect_command(const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "ls" && args[0] != "inspect" && args[0] != "break")) {
    return std::nullopt;
  }
  try {
    const auto parsed = parse(args);
    if (parsed.command == "help") {
      std::cout << inspect_usage << "\n" << inspect_help;
      return 0;
    }
    return run(parsed);
  } catch (const usage_error& e) {
    std::cerr << "dlock: " << e.what() << "\n" << inspect_usage;
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n" << inspect_usage;
  } catch (const dlock::unsupported_operation& e) {
    std::cerr << e.what() << "\n";
    return exit_unavailable;
  } catch (const dlock::error& e) {
    std::cerr << e.what() << "\n";
    return exit_unavailable;
  }
  return exit_usage;
}

}  // namespace dlock::cli
