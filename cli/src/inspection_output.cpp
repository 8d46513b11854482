// The dlock command's screens for inspections (inspection_output.hpp).
#include "inspection_output.hpp"

#include <cstdio>
#include <ctime>
#include <iomanip>
#include <sstream>

namespace dlock::cli {

namespace {

using std::chrono::system_clock;

std::string rfc3339(system_clock::time_point at) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(at);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(at - seconds).count();
  const std::time_t t = system_clock::to_time_t(seconds);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                utc.tm_sec, static_cast<long long>(micros));
  return buffer;
}


std::string seconds_of(std::chrono::nanoseconds d) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3) << std::chrono::duration<double>(d).count();
  return out.str();
}

std::string party_json(const lock_party& party, system_clock::time_point now) {
  std::string out = "{\"kind\":" + json_string(std::string(to_string(party.kind)));
  out += ",\"owner\":" + json_string(party.owner);
  out += ",\"fencing_token\":" +
         (party.fencing_token ? std::to_string(*party.fencing_token) : std::string("null"));
  out += ",\"since\":" + (party.since ? json_string(rfc3339(*party.since)) : std::string("null"));
  out += ",\"for_seconds\":" + (party.since ? seconds_of(now - *party.since) : std::string("null"));
  out += ",\"lease_left_seconds\":" +
         (party.lease_left ? seconds_of(*party.lease_left) : std::string("null"));
  return out + "}";
}

std::string parties_json(const std::vector<lock_party>& parties, system_clock::time_point now) {
  std::string out = "[";
  for (std::size_t i = 0; i < parties.size(); ++i) {
    out += (i ? "," : "") + party_json(parties[i], now);
  }
  return out + "]";
}

std::string party_line(const lock_party& party, system_clock::time_point now) {
  std::string line = "  " + std::string(to_string(party.kind));
  if (party.fencing_token) line += "  token " + std::to_string(*party.fencing_token);
  if (party.since) {
    line += "  since " + rfc3339(*party.since) + " (" + short_duration(now - *party.since) + ")";
  }
  if (party.lease_left) line += "  lease left " + short_duration(*party.lease_left);
  line += "  owner: " + (party.owner.empty() ? std::string("(unknown)") : party.owner);
  return line + "\n";
}

}  // namespace

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string short_duration(std::chrono::nanoseconds d) {
  using namespace std::chrono;
  if (d < nanoseconds::zero()) d = nanoseconds::zero();
  const auto ms = duration_cast<milliseconds>(d).count();
  char buffer[32];
  if (ms < 1000) {
    std::snprintf(buffer, sizeof buffer, "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buffer, sizeof buffer, "%.1fs", static_cast<double>(ms) / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  }
  return buffer;
}

std::string ls_table(const std::vector<lock_inspection>& locks, system_clock::time_point now) {
  std::ostringstream out;
  out << std::left << std::setw(10) << "HELD FOR" << std::setw(9) << "HOLDERS" << std::setw(9)
      << "WAITERS" << std::setw(22) << "TOKEN" << std::setw(36) << "OWNER" << "NAME\n";
  for (const auto& found : locks) {
    const auto since = found.held_since();
    const lock_party* oldest = nullptr;
    for (const auto& holder : found.holders) {
      if (!oldest || (holder.since && (!oldest->since || *holder.since < *oldest->since))) {
        oldest = &holder;
      }
    }
    out << std::setw(10) << (since ? short_duration(now - *since) : "?") << std::setw(9)
        << found.holders.size() << std::setw(9)
        << (found.waiters_visible ? std::to_string(found.waiters.size()) : "?") << std::setw(22)
        << (oldest && oldest->fencing_token ? std::to_string(*oldest->fencing_token) : "-")
        << std::setw(36) << (oldest && !oldest->owner.empty() ? oldest->owner : "-")
        << found.name << "\n";
  }
  return out.str();
}

std::string inspect_screen(const lock_inspection& found, system_clock::time_point now) {
  std::string out = "lock '" + found.name + "'";
  if (found.max_count) out += " (semaphore of " + std::to_string(*found.max_count) + ")";
  out += "\nholders: " + (found.holders.empty() ? std::string("none") : "") + "\n";
  for (const auto& holder : found.holders) out += party_line(holder, now);
  if (!found.waiters_visible) {
    out += "waiters: not visible on this backend\n";
  } else {
    out += "waiters: " + (found.waiters.empty() ? std::string("none") : "") + "\n";
    for (const auto& waiter : found.waiters) out += party_line(waiter, now);
  }
  return out;
}

std::string to_json(const lock_inspection& found, system_clock::time_point now) {
  std::string out = "{\"name\":" + json_string(found.name);
  out += ",\"max_count\":" +
         (found.max_count ? std::to_string(*found.max_count) : std::string("null"));
  out += ",\"holders\":" + parties_json(found.holders, now);
  out += ",\"waiters_visible\":" + std::string(found.waiters_visible ? "true" : "false");
  out += ",\"waiters\":" + parties_json(found.waiters, now);
  return out + "}";
}

std::string to_json(const std::vector<lock_inspection>& locks, system_clock::time_point now) {
  std::string out = "[";
  for (std::size_t i = 0; i < locks.size(); ++i) out += (i ? "," : "") + to_json(locks[i], now);
  return out + "]";
}

}  // namespace dlock::cli
