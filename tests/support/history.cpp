#include "history.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace support {

std::int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void append_history_line(const std::filesystem::path& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string());
  const std::string text = line + "\n";
  const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!whole) throw std::runtime_error("short write to " + path.string());
}

history read_history(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  history h;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    std::istringstream line(text);
    std::string kind;
    line >> kind;
    bool ok = true;
    if (kind == "S") {
      section s;
      std::int64_t read = 0;
      std::string write;
      int lost = 0;
      ok = static_cast<bool>(line >> s.pid >> s.token >> s.begin >> s.end >> read >> write >> lost);
      if (read >= 0) s.read = read;
      if (write != "-") s.write_accepted = write == "1";
      s.lost = lost != 0;
      h.sections.push_back(s);
    } else if (kind == "P") {
      fault_interval f;
      ok = static_cast<bool>(line >> f.pid >> f.from >> f.to);
      h.faults.push_back(f);
    } else if (kind == "K" || kind == "X") {
      fault_interval f;
      ok = static_cast<bool>(line >> f.pid >> f.from);
      f.to = INT64_MAX;
      h.faults.push_back(f);
    } else {
      ok = false;
    }
    if (!ok) {
      throw std::runtime_error(path.string() + ":" + std::to_string(number) + ": malformed '" +
                               text + "'");
    }
  }
  return h;
}

namespace {

std::string describe(const section& s) {
  return "section of pid " + std::to_string(s.pid) + " with token " + std::to_string(s.token) +
         " [" + std::to_string(s.begin) + ", " + std::to_string(s.end) + "]";
}

bool faulted_during(const history& h, const section& s) {
  if (s.lost) return true;
  return std::any_of(h.faults.begin(), h.faults.end(), [&](const fault_interval& f) {
    return f.pid == s.pid && f.from <= s.end && f.to >= s.begin;
  });
}

void check_unique_tokens(const std::vector<section>& by_begin, verdict& v) {
  std::map<std::uint64_t, const section*> seen;
  for (const section& s : by_begin) {
    auto [it, fresh] = seen.emplace(s.token, &s);
    if (!fresh) {
      v.violations.push_back("token " + std::to_string(s.token) + " granted twice: " +
                             describe(*it->second) + " and " + describe(s));
    }
  }
}

/// Counts overlapping pairs (sorted by begin); calls `unexcused` for pairs that are not.
template <typename Judge>
void sweep_overlaps(const history& h, const std::vector<section>& by_begin, verdict& v,
                    Judge unexcused) {
  for (std::size_t i = 0; i < by_begin.size(); ++i) {
    for (std::size_t j = i + 1; j < by_begin.size() && by_begin[j].begin <= by_begin[i].end; ++j) {
      ++v.overlaps;
      if (faulted_during(h, by_begin[i]) || faulted_during(h, by_begin[j])) {
        ++v.excused_overlaps;
      } else {
        unexcused(by_begin[i], by_begin[j]);
      }
    }
  }
}

}  // namespace

verdict check_fenced_mutex(const history& h) {
  verdict v;
  std::vector<section> by_begin = h.sections;
  std::sort(by_begin.begin(), by_begin.end(),
            [](const section& a, const section& b) { return a.begin < b.begin; });
  v.sections = by_begin.size();
  v.accepted_writes = static_cast<std::size_t>(
      std::count_if(by_begin.begin(), by_begin.end(),
                    [](const section& s) { return s.write_accepted.value_or(false); }));
  check_unique_tokens(by_begin, v);

  // (2) a section that ended before another began has the lower token.
  std::vector<section> by_end = by_begin;
  std::sort(by_end.begin(), by_end.end(),
            [](const section& a, const section& b) { return a.end < b.end; });
  std::size_t ended = 0;
  const section* highest = nullptr;
  for (const section& s : by_begin) {
    while (ended < by_end.size() && by_end[ended].end < s.begin) {
      if (!highest || by_end[ended].token > highest->token) highest = &by_end[ended];
      ++ended;
    }
    if (highest && highest->token >= s.token) {
      v.violations.push_back("fencing token went back: " + describe(*highest) +
                             " ended before " + describe(s) + " began");
    }
  }

  // (3) overlaps only where safety rests on the token.
  sweep_overlaps(h, by_begin, v, [&](const section& a, const section& b) {
    v.violations.push_back("two holders at once: " + describe(a) + " and " + describe(b));
  });
  return v;
}

std::vector<std::string> check_fenced_counter(const std::filesystem::path& journal) {
  std::ifstream in(journal);
  if (!in) throw std::runtime_error("cannot read " + journal.string());
  std::vector<std::string> violations;
  std::uint64_t token = 0, previous_token = 0;
  std::int64_t value = 0, previous_value = 0;
  for (int line = 1; in >> token >> value; ++line) {
    const std::string where = journal.string() + ":" + std::to_string(line) + ": ";
    if (value != previous_value + 1) {
      violations.push_back(where + "lost update: token " + std::to_string(token) + " stored " +
                           std::to_string(value) + " over " + std::to_string(previous_value));
    }
    if (token < previous_token) {
      violations.push_back(where + "token " + std::to_string(token) + " accepted after " +
                           std::to_string(previous_token));
    }
    previous_token = token;
    previous_value = value;
  }
  return violations;
}

verdict check_semaphore(const history& h, std::uint32_t max_count) {
  verdict v;
  std::vector<section> by_begin = h.sections;
  std::sort(by_begin.begin(), by_begin.end(),
            [](const section& a, const section& b) { return a.begin < b.begin; });
  v.sections = by_begin.size();
  check_unique_tokens(by_begin, v);
  // Sweep the begin and end events of the holders that count.
  std::vector<std::pair<std::int64_t, int>> events;
  for (const section& s : by_begin) {
    if (faulted_during(h, s)) continue;
    events.emplace_back(s.begin, +1);
    events.emplace_back(s.end, -1);
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;  // ends first
  });
  int holders = 0;
  for (const auto& [at, change] : events) {
    holders += change;
    if (holders > static_cast<int>(max_count)) {
      v.violations.push_back(std::to_string(holders) + " holders at once at " +
                             std::to_string(at) + " (max_count " + std::to_string(max_count) +
                             ")");
      break;
    }
  }
  return v;
}

}  // namespace support
