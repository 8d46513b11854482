// dlock check (check_command.hpp): for a resource server's scripts, which receive a write
// stamped with a fencing token and ask whether its grant still holds the lock.
#include "check_command.hpp"

#include <charconv>
#include <cstdint>
#include <iostream>
#include <stdexcept>

#include <dlock/core.hpp>

#include "backend_plugins.hpp"
#include "command_line.hpp"
#include "exit_codes.hpp"

namespace dlock::cli {

namespace {

const char* const check_usage = "usage: dlock check [URL] NAME TOKEN [--write]\n";

const char* const check_help =
    "check asks the lock service whether the grant with fencing token TOKEN still holds the\n"
    "lock NAME (with --write: the write lock of the reader-writer lock NAME). It prints\n"
    "\"current\" or \"not current\". Without URL, $DLOCK_URL is used.\n"
    "exit status: 0 current; 1 not current; 64 usage error, or an option of the URL that keeps\n"
    "no token with its grants; 69 backend unreachable or failing. Details: docs/cli.md.\n";

struct check_args {
  std::string url;
  std::string name;
  std::uint64_t token = 0;
  bool write = false;
  bool help = false;
};

std::uint64_t parse_fencing_token(const std::string& text) {
  std::uint64_t token = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw usage_error("TOKEN must be a fencing token (a whole number), not '" + text + "'");
  }
  return token;
}

check_args parse_check(const std::vector<std::string>& args) {
  check_args result;
  std::vector<std::string> positionals;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--write") {
      result.write = true;
    } else if (arg == "-h" || arg == "--help") {
      result.help = true;
      return result;
    } else if (arg.starts_with("-") && arg.size() > 1) {
      throw usage_error("unknown option '" + arg + "' for dlock check");
    } else {
      positionals.push_back(arg);
    }
  }
  result.url = take_url(positionals);
  if (positionals.size() < 2) throw usage_error("check needs a lock NAME and a TOKEN");
  if (positionals.size() > 2) throw usage_error("too many arguments: '" + positionals[2] + "'");
  result.name = positionals[0];
  result.token = parse_fencing_token(positionals[1]);
  return result;
}

}  // namespace

std::optional<int> run_check_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "check") return std::nullopt;
  try {
    const auto parsed = parse_check(args);
    if (parsed.help) {
      std::cout << check_usage << "\n" << check_help;
      return 0;
    }
    const auto locks = make_provider(parsed.url);
    const bool current =
        parsed.write ? locks->create_reader_writer_lock(parsed.name).is_current_write(parsed.token)
                     : locks->create_lock(parsed.name).is_current(parsed.token);
    std::cout << (current ? "current" : "not current") << "\n";
    return current ? 0 : 1;
  } catch (const usage_error& e) {
    std::cerr << "dlock: " << e.what() << "\n" << check_usage;
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n" << check_usage;
  } catch (const dlock::error& e) {
    std::cerr << e.what() << "\n";
    return exit_unavailable;
  }
  return exit_usage;
}

}  // namespace dlock::cli
