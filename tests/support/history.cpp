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

history history::only(std::initializer_list<hold> kinds) const {
  history selected{.faults = faults, .restarts = restarts};
  for (const section& s : sections) {
    if (std::find(kinds.begin(), kinds.end(), s.kind) != kinds.end()) {
      selected.sections.push_back(s);
    }
  }
  return selected;
}

namespace {

bool parse_hold(const std::string& text, hold& kind) {
  if (text == "lock") kind = hold::lock;
  else if (text == "read") kind = hold::read;
  else if (text == "write") kind = hold::write;
  else if (text == "slot") kind = hold::slot;
  else return false;
  return true;
}

bool parse_section(std::istringstream& line, section& s) {
  std::string read, write, kind;
  int lost = 0;
  if (!(line >> s.pid >> s.token >> s.begin >> s.end >> read >> write >> lost)) return false;
  s.read_tried = read != "-";
  if (s.read_tried && read != "-1") s.read = std::stoll(read);
  if (write != "-") s.write_accepted = write == "1";
  s.lost = lost != 0;
  return !(line >> kind) || parse_hold(kind, s.kind);
}

/// Sections begun and never ended become killed sections ending at their process's kill.
void close_killed(const std::filesystem::path& path, std::map<std::pair<pid_t, std::uint64_t>,
                  section>& begun, history& h) {
  for (auto& [key, s] : begun) {
    const auto kill = std::find_if(h.faults.begin(), h.faults.end(), [&](const fault_interval& f) {
      return f.kind == 'K' && f.pid == s.pid && f.from >= s.begin;
    });
    if (kill == h.faults.end()) {
      throw std::runtime_error(path.string() + ": pid " + std::to_string(s.pid) +
                               " began a section with token " + std::to_string(s.token) +
                               " that never ended, and was not killed");
    }
    s.end = kill->from;
    s.killed = true;
    s.read_tried = false;
    h.sections.push_back(s);
  }
}

}  // namespace

history read_history(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  history h;
  std::map<std::pair<pid_t, std::uint64_t>, section> begun;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    std::istringstream line(text);
    std::string kind;
    line >> kind;
    bool ok = true;
    if (kind == "B") {
      section s;
      std::string held;
      ok = line >> s.pid >> s.token >> s.begin >> held && parse_hold(held, s.kind);
      begun[{s.pid, s.token}] = s;
    } else if (kind == "S") {
      section s;
      ok = parse_section(line, s);
      begun.erase({s.pid, s.token});
      h.sections.push_back(s);
    } else if (kind == "P") {
      fault_interval f;
      ok = static_cast<bool>(line >> f.pid >> f.from >> f.to);
      h.faults.push_back(f);
    } else if (kind == "R") {
      server_restart r;
      ok = line >> r.from >> r.to >> r.server && r.from <= r.to;
      h.restarts.push_back(r);
    } else if (kind == "K" || kind == "X") {
      fault_interval f{.to = INT64_MAX, .kind = kind[0]};
      ok = static_cast<bool>(line >> f.pid >> f.from);
      h.faults.push_back(f);
    } else {
      ok = false;
    }
    if (!ok) {
      throw std::runtime_error(path.string() + ":" + std::to_string(number) + ": malformed '" +
                               text + "'");
    }
  }
  close_killed(path, begun, h);
  return h;
}

}  // namespace support
