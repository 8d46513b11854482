// The checkers of history.hpp: the invariants over a run's sections, and the count of its
// faults that landed.
#include <algorithm>
#include <fstream>
#include <map>
#include <stdexcept>

#include "history.hpp"

namespace support {

namespace {

const char* hold_name(hold kind) {
  switch (kind) {
    case hold::lock: return "section";
    case hold::read: return "read section";
    case hold::write: return "write section";
    case hold::slot: return "slot section";
  }
  return "section";
}

std::string describe(const section& s) {
  return std::string(hold_name(s.kind)) + " of pid " + std::to_string(s.pid) + " with token " +
         std::to_string(s.token) + " [" + std::to_string(s.begin) + ", " +
         std::to_string(s.end) + "]";
}

/// Whether the nemesis paused, killed or cut off the section's process during it.
bool struck_during(const history& h, const section& s) {
  return std::any_of(h.faults.begin(), h.faults.end(), [&](const fault_interval& f) {
    return f.pid == s.pid && f.from <= s.end && f.to >= s.begin;
  });
}

bool faulted_during(const history& h, const section& s) { return s.lost || struck_during(h, s); }

std::vector<section> sorted_by_begin(const history& h) {
  std::vector<section> by_begin = h.sections;
  std::sort(by_begin.begin(), by_begin.end(),
            [](const section& a, const section& b) { return a.begin < b.begin; });
  return by_begin;
}

/// Whether a section excludes every other holder: a lock's or a writer's. A release can admit
/// two readers, or two waiters for a semaphore's slots, at once, and each learns of its grant
/// when it can (one may be paused or cut off): their tokens follow their places in the queue,
/// not the order in which their sections began.
bool exclusive(const section& s) { return s.kind == hold::lock || s.kind == hold::write; }

/// Invariant 4: unique tokens, rising between exclusive sections that do not overlap.
void check_tokens(const std::vector<section>& by_begin, verdict& v) {
  std::map<std::uint64_t, const section*> seen;
  for (const section& s : by_begin) {
    auto [it, fresh] = seen.emplace(s.token, &s);
    if (!fresh) {
      v.violations.push_back("token " + std::to_string(s.token) + " granted twice: " +
                             describe(*it->second) + " and " + describe(s));
    }
  }
  std::vector<section> by_end = by_begin;
  std::sort(by_end.begin(), by_end.end(),
            [](const section& a, const section& b) { return a.end < b.end; });
  // The highest token among the sections ended so far: all of them, and the writers' only.
  std::size_t ended = 0;
  const section* highest = nullptr;
  const section* highest_exclusive = nullptr;
  for (const section& s : by_begin) {
    while (ended < by_end.size() && by_end[ended].end < s.begin) {
      const section& e = by_end[ended++];
      if (!highest || e.token > highest->token) highest = &e;
      if (exclusive(e) && (!highest_exclusive || e.token > highest_exclusive->token)) {
        highest_exclusive = &e;
      }
    }
    const section* before = exclusive(s) ? highest : highest_exclusive;
    if (before && before->token >= s.token) {
      v.violations.push_back("fencing token went back: " + describe(*before) +
                             " ended before " + describe(s) + " began");
    }
  }
}

/// Invariants 1 and 2: counts overlapping pairs; a pair that `may_share` (two readers), or
/// whose holder was faulted, is excused, any other is a violation.
template <typename MayShare>
verdict check_exclusion(const history& h, MayShare may_share) {
  verdict v;
  const std::vector<section> by_begin = sorted_by_begin(h);
  v.sections = by_begin.size();
  v.accepted_writes = static_cast<std::size_t>(
      std::count_if(by_begin.begin(), by_begin.end(),
                    [](const section& s) { return s.write_accepted.value_or(false); }));
  check_tokens(by_begin, v);
  for (std::size_t i = 0; i < by_begin.size(); ++i) {
    const section& a = by_begin[i];
    for (std::size_t j = i + 1; j < by_begin.size() && by_begin[j].begin <= a.end; ++j) {
      const section& b = by_begin[j];
      ++v.overlaps;
      if (may_share(a, b) || faulted_during(h, a) || faulted_during(h, b)) {
        ++v.excused_overlaps;
      } else if (a.kind == hold::read || b.kind == hold::read) {
        v.violations.push_back("a reader and a writer at once: " + describe(a) + " and " +
                               describe(b));
      } else {
        v.violations.push_back("two holders at once: " + describe(a) + " and " + describe(b));
      }
    }
  }
  return v;
}

}  // namespace

verdict check_fenced_mutex(const history& h) {
  return check_exclusion(h.only({hold::lock}), [](const section&, const section&) {
    return false;
  });
}

verdict check_reader_writer(const history& h) {
  return check_exclusion(h.only({hold::read, hold::write}), [](const section& a,
                                                               const section& b) {
    return a.kind == hold::read && b.kind == hold::read;
  });
}

verdict check_semaphore(const history& all, std::uint32_t max_count) {
  const history h = all.only({hold::slot});
  verdict v;
  const std::vector<section> by_begin = sorted_by_begin(h);
  v.sections = by_begin.size();
  check_tokens(by_begin, v);
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

fault_figures judge_faults(const history& h, const fault_expectations& expected) {
  fault_figures figures;
  figures.faults = h.faults.size();
  for (const fault_interval& f : h.faults) {
    const bool landed = std::any_of(h.sections.begin(), h.sections.end(), [&](const section& s) {
      return s.pid == f.pid && s.begin <= f.from && f.from <= s.end;
    });
    figures.landed += landed ? 1 : 0;
    figures.landed_kills += landed && f.kind == 'K' ? 1 : 0;
  }
  figures.restarts = h.restarts.size();
  for (const server_restart& r : h.restarts) {
    figures.landed_restarts +=
        std::any_of(h.sections.begin(), h.sections.end(), [&](const section& s) {
          return s.begin <= r.from && r.from <= s.end;
        }) ? 1 : 0;
  }
  figures.faults += figures.restarts;
  figures.landed += figures.landed_restarts;
  for (const section& s : h.sections) {
    const auto spans = [&](const server_restart& r) { return s.begin <= r.from && r.to <= s.end; };
    if (!struck_during(h, s) && std::any_of(h.restarts.begin(), h.restarts.end(), spans)) {
      ++(s.lost ? figures.lost_across_restart : figures.held_across_restart);
    }
    figures.refusals += s.refused() ? 1 : 0;
    if (!expected.lease_ns || (s.kind != hold::lock && s.kind != hold::write)) continue;
    figures.paused_past_lease += std::any_of(h.faults.begin(), h.faults.end(), [&](const auto& f) {
      return f.kind == 'P' && f.pid == s.pid && s.begin <= f.from && f.to <= s.end &&
             f.to - f.from > *expected.lease_ns;
    }) ? 1 : 0;
  }
  if (figures.landed < expected.min_landed) {
    figures.violations.push_back("only " + std::to_string(figures.landed) + " of " +
                                 std::to_string(figures.faults) +
                                 " faults landed inside a section (at least " +
                                 std::to_string(expected.min_landed) + " wanted): the run "
                                 "proves nothing");
  }
  const std::size_t across = figures.held_across_restart + figures.lost_across_restart;
  if (across < expected.min_sections_across_restart) {
    figures.violations.push_back(
        "only " + std::to_string(across) + " sections outlasted one of the " +
        std::to_string(figures.restarts) + " server restarts unstruck by other faults (at least " +
        std::to_string(expected.min_sections_across_restart) + " wanted)");
  }
  if (figures.paused_past_lease > 0 && figures.refusals == 0) {
    figures.violations.push_back(std::to_string(figures.paused_past_lease) +
                                 " holders were paused past their lease, and the fenced store "
                                 "refused none of their steps");
  }
  return figures;
}

}  // namespace support
