// How the dlock command shows inspections: the ls table, inspect's screen, and JSON for both.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <dlock/core/inspection.hpp>

namespace dlock::cli {

/// `text` as a JSON string, quotes included (control characters escaped), for every --json.
std::string json_string(const std::string& text);

/// "3m12s", "1h04m", "850ms": a duration for a screen.
std::string short_duration(std::chrono::nanoseconds d);

/// The ls table: one line per name, held longest first (as given), with a header.
std::string ls_table(const std::vector<lock_inspection>& locks,
                     std::chrono::system_clock::time_point now);

/// inspect's screen: the name, then its holders and waiters, one line each.
std::string inspect_screen(const lock_inspection& found, std::chrono::system_clock::time_point now);

/// One JSON object (inspect --json), or an array of them (ls --json); times in RFC 3339 UTC,
/// durations in seconds.
std::string to_json(const lock_inspection& found, std::chrono::system_clock::time_point now);
std::string to_json(const std::vector<lock_inspection>& locks,
                    std::chrono::system_clock::time_point now);

}  // namespace dlock::cli
