// A nemesis run's history and the checker that judges it, in the manner of Jepsen: every
// critical section is logged with its fencing token and what the fenced store said, every
// fault with its time, and the checker finds any history a correct lock could not produce.
//
// Log lines (one write(2) each, O_APPEND, CLOCK_MONOTONIC nanoseconds):
//   S <pid> <token> <begin> <end> <read> <write> <lost>
//       a critical section: begun after the grant, ended before the release; <read> is the
//       value the store gave (-1: refused), <write> is 1 accepted, 0 refused, - not tried;
//       <lost> is 1 when the handle said lost() before the release.
//   P <pid> <from> <to>     the nemesis stopped the process (SIGSTOP) from..to
//   K <pid> <at>            the nemesis killed the process (SIGKILL)
//   X <pid> <at> <what>     partition or other fault affecting that process from <at> (free text)
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace support {

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine.
std::int64_t monotonic_ns();

struct section {
  pid_t pid = 0;
  std::uint64_t token = 0;
  std::int64_t begin = 0, end = 0;
  std::optional<std::int64_t> read;   ///< nullopt: the store refused the token
  std::optional<bool> write_accepted; ///< nullopt: not tried
  bool lost = false;
};

struct fault_interval {
  pid_t pid = 0;
  std::int64_t from = 0, to = 0;  ///< a kill lasts to the end of the run
};

struct history {
  std::vector<section> sections;
  std::vector<fault_interval> faults;
};

/// Appends one line to the log at `path` (creating it) in one write(2).
void append_history_line(const std::filesystem::path& path, const std::string& line);

/// Reads a log. Throws std::runtime_error naming the first malformed line.
history read_history(const std::filesystem::path& path);

struct verdict {
  std::size_t sections = 0;
  std::size_t accepted_writes = 0;
  std::size_t overlaps = 0;           ///< pairs of sections that overlapped in time
  std::size_t excused_overlaps = 0;   ///< ... whose earlier holder was faulted or told lost
  std::vector<std::string> violations;
};

/// The fenced mutex model over the sections: (1) no two grants share a token; (2) a section
/// that ended before another began has the lower token; (3) two sections overlap only when the
/// earlier holder was paused, killed, partitioned or told lost during it (then safety rests on
/// the token, which check_fenced_counter() judges).
verdict check_fenced_mutex(const history& h);

/// The fenced counter's journal (fenced_store::journal_path()): no increment was lost, i.e.
/// every accepted write stored the value before it plus one, and tokens never went back.
/// Returns the violations.
std::vector<std::string> check_fenced_counter(const std::filesystem::path& journal);

/// The semaphore model: at no moment do more than `max_count` sections overlap, counting only
/// holders that were neither faulted nor told lost during their section; tokens are unique.
verdict check_semaphore(const history& h, std::uint32_t max_count);

}  // namespace support
