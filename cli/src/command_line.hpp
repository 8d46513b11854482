// The dlock command's arguments.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::cli {

enum class lock_kind { exclusive, shared, write, semaphore };

struct command_line {
  std::string url;
  std::string name;
  lock_kind kind = lock_kind::exclusive;
  std::uint32_t semaphore_count = 0;
  /// nullopt: wait forever; zero: one attempt (-n).
  std::optional<std::chrono::nanoseconds> wait;
  int conflict_exit_code = 1;
  std::chrono::nanoseconds kill_grace = std::chrono::seconds(10);
  /// nullopt: the provider's default (none unless the URL says max_hold=).
  std::optional<std::chrono::nanoseconds> max_hold;
  /// nullopt: the provider's default (none unless the URL says min_hold=).
  std::optional<std::chrono::nanoseconds> min_hold;
  bool elect = false;                 ///< dlock elect: campaign in election NAME, not lock it
  std::optional<std::string> value;   ///< dlock elect --value: the leader's value
  bool verbose = false;
  bool help = false;
  bool version = false;
  std::vector<std::string> command;
};

/// A usage error: printed as one line followed by the short usage, exit 64.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The URL of a subcommand's positional arguments: the first, when it looks like one
/// ("scheme://"), taken out of `positionals`; else $DLOCK_URL. Throws usage_error when neither.
std::string take_url(std::vector<std::string>& positionals);

/// Parses argv (without argv[0]). `default_url` is $DLOCK_URL, if set.
/// Throws usage_error naming the offending argument.
command_line parse_command_line(const std::vector<std::string>& args,
                                std::optional<std::string> default_url);

extern const char* const usage_text;
extern const char* const help_text;

}  // namespace dlock::cli
