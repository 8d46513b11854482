#include "command_line.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <dlock/core/backend/provider_url.hpp>

namespace dlock::cli {

const char* const usage_text =
    "usage: dlock [options] [URL] NAME -- COMMAND [ARGS...]\n"
    "       dlock elect [options] [URL] NAME [--value V] -- COMMAND [ARGS...]\n"
    "       dlock leader [URL] NAME [--watch] [--json]\n"
    "       dlock ls|inspect|break ...   (dlock ls --help)\n"
    "       dlock check [URL] NAME TOKEN [--write]   (dlock check --help)\n"
    "       dlock --help | --version\n";

const char* const help_text =
    "Runs COMMAND while holding the distributed lock NAME at URL (flock(1) across machines).\n"
    "\n"
    "URL is a provider URL such as file:///var/lock/app, redis://host:6379 or\n"
    "zookeeper://h1:2181,h2:2181/locks; without it, $DLOCK_URL is used.\n"
    "\n"
    "options:\n"
    "  -w, --wait SECONDS       give up after SECONDS (fractional, or 250ms, 2m) waiting\n"
    "  -n, --nonblock           give up at once if the lock is held (same as -w 0)\n"
    "  -s, --shared             take the shared (read) side of reader-writer lock NAME\n"
    "      --write              take the exclusive (write) side of reader-writer lock NAME\n"
    "      --semaphore N        take one of N slots of semaphore NAME\n"
    "  -E, --conflict-exit-code CODE\n"
    "                           exit with CODE when the lock was not obtained (default 1)\n"
    "      --kill-grace SECONDS after the lock is lost, wait this long between SIGTERM and\n"
    "                           SIGKILL to the command's process group (default 10)\n"
    "      --max-hold SECONDS   treat the lock as lost once held this long: the command is\n"
    "                           terminated as for any loss (default: none)\n"
    "      --min-hold SECONDS   keep an exclusive lock held at least this long from the grant,\n"
    "                           by the server's clock, even if the command ends sooner or\n"
    "                           dlock dies: a job runs once per window (docs/recipes.md)\n"
    "  -v, --verbose            report acquire, fencing token and release on stderr\n"
    "  -h, --help               print this help\n"
    "  -V, --version            print the version\n"
    "\n"
    "The command runs in its own process group with DLOCK_FENCING_TOKEN in its environment.\n"
    "SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to it; if dlock dies, the command is\n"
    "killed. If the lock is lost, the command's process group gets SIGTERM, then SIGKILL.\n"
    "\n"
    "exit status: the command's (128+N if killed by signal N); CODE (-E) if the lock was not\n"
    "obtained; 64 usage error; 69 backend unreachable or failing; 70 internal error;\n"
    "71 operating-system error; 75 lock lost while the command ran; 126 command not\n"
    "executable; 127 command not found; 128+N when signal N interrupted the wait.\n"
    "\n"
    "dlock elect runs COMMAND while this process leads election NAME (campaigning with\n"
    "--value, default host:pid), with DLOCK_TERM (the term, also DLOCK_FENCING_TOKEN) in its\n"
    "environment; the options above apply, and a lost lead ends the command as a lost lock.\n"
    "dlock leader prints who leads election NAME (\"TERM VALUE\", or \"none\" and exit 1),\n"
    "as JSON with --json, and every change until interrupted with --watch.\n"
    "Details: docs/cli.md.\n";

std::string take_url(std::vector<std::string>& positionals) {
  if (!positionals.empty() && positionals[0].find("://") != std::string::npos) {
    std::string url = std::move(positionals[0]);
    positionals.erase(positionals.begin());
    return url;
  }
  if (const char* url = std::getenv("DLOCK_URL"); url && *url) return url;
  throw usage_error("no URL given and DLOCK_URL is not set");
}

namespace {

std::chrono::nanoseconds parse_seconds(const std::string& option, const std::string& text) {
  double seconds = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, seconds);
  if (ec == std::errc{} && end == last) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) {
      throw usage_error(option + " wants a number of seconds from 0 to 1e9, not '" + text + "'");
    }
    return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
  }
  try {
    const auto duration = dlock::parse_duration(option, text);
    if (duration.count() < 0) throw std::invalid_argument("negative");
    return duration;
  } catch (const std::invalid_argument&) {
    throw usage_error(option + " wants seconds (e.g. 5, 0.25) or a duration (250ms, 2m), not '" +
                      text + "'");
  }
}

long parse_integer(const std::string& option, const std::string& text, long min, long max) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < min || value > max) {
    throw usage_error(option + " wants an integer from " + std::to_string(min) + " to " +
                      std::to_string(max) + ", not '" + text + "'");
  }
  return value;
}

}  // namespace

command_line parse_command_line(const std::vector<std::string>& args,
                                std::optional<std::string> default_url) {
  command_line result;
  std::vector<std::string> positionals;
  bool saw_separator = false;
  bool saw_kind = false;
  auto set_kind = [&](lock_kind kind, const std::string& option) {
    if (saw_kind && result.kind != kind) {
      throw usage_error(option + " conflicts with an earlier -s, --write or --semaphore");
    }
    saw_kind = true;
    result.kind = kind;
  };

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      result.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      saw_separator = true;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positionals.push_back(arg);
      continue;
    }
    // Split "--opt=value" and "-wVALUE"; `attached` is the value given in the same word.
    std::string option = arg;
    std::optional<std::string> attached;
    if (arg.starts_with("--")) {
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        option = arg.substr(0, eq);
        attached = arg.substr(eq + 1);
      }
    } else if (arg.size() > 2) {
      option = arg.substr(0, 2);
      attached = arg.substr(2);
    }
    auto value = [&]() -> std::string {
      if (attached) return *attached;
      if (i + 1 >= args.size() || args[i + 1] == "--") {
        throw usage_error(option + " needs a value");
      }
      return args[++i];
    };
    auto no_value = [&] {
      if (attached) throw usage_error(option + " takes no value, got '" + arg + "'");
    };

    if (option == "-w" || option == "--wait" || option == "--timeout") {
      result.wait = parse_seconds(option, value());
    } else if (option == "-n" || option == "--nonblock") {
      no_value();
      result.wait = std::chrono::nanoseconds::zero();
    } else if (option == "-s" || option == "--shared") {
      no_value();
      set_kind(lock_kind::shared, option);
    } else if (option == "--write") {
      no_value();
      set_kind(lock_kind::write, option);
    } else if (option == "--semaphore") {
      result.semaphore_count =
          static_cast<std::uint32_t>(parse_integer(option, value(), 1, 1'000'000));
      set_kind(lock_kind::semaphore, option);
    } else if (option == "-E" || option == "--conflict-exit-code") {
      result.conflict_exit_code = static_cast<int>(parse_integer(option, value(), 0, 255));
    } else if (option == "--kill-grace") {
      result.kill_grace = parse_seconds(option, value());
    } else if (option == "--max-hold") {
      result.max_hold = parse_seconds(option, value());
    } else if (option == "--min-hold") {
      result.min_hold = parse_seconds(option, value());
    } else if (option == "-v" || option == "--verbose") {
      no_value();
      result.verbose = true;
    } else if (option == "-h" || option == "--help") {
      result.help = true;
      return result;
    } else if (option == "-V" || option == "--version") {
      result.version = true;
      return result;
    } else {
      throw usage_error("unknown option '" + arg + "'");
    }
  }

  if (result.min_hold && result.kind != lock_kind::exclusive) {
    throw usage_error("--min-hold is for exclusive locks only");
  }
  if (!saw_separator && positionals.size() > 2) {
    throw usage_error("missing '--' before the command '" + positionals[2] + "'");
  }
  if (positionals.size() == 2) {
    result.url = positionals[0];
    result.name = positionals[1];
  } else if (positionals.size() == 1) {
    if (positionals[0].find("://") != std::string::npos) {
      throw usage_error("missing the lock NAME after the URL");
    }
    if (!default_url || default_url->empty()) {
      throw usage_error("no URL given and DLOCK_URL is not set");
    }
    result.url = *default_url;
    result.name = positionals[0];
  } else if (positionals.empty()) {
    throw usage_error("missing the lock NAME");
  } else {
    throw usage_error("too many arguments before '--': '" + positionals[2] + "'");
  }
  if (!saw_separator) {
    throw usage_error("missing '--' before the command");
  }
  if (result.command.empty()) {
    throw usage_error("missing the COMMAND after '--'");
  }
  return result;
}

}  // namespace dlock::cli
