// A nemesis run's history and the checker that judges it, in the manner of Jepsen: every
// critical section is logged with its fencing token and what the fenced store said, every
// fault with its time, and the checker finds any history a correct lock could not produce.
//
// Log lines (one write(2) each, O_APPEND, CLOCK_MONOTONIC nanoseconds):
//   B <pid> <token> <begin> <hold> [<planned end>]
//       a critical section begun (the grant is in hand), to last at least until <planned end>.
//       The aimed nemesis reads these to know who holds; one never followed by its S line was
//       ended by a kill.
//   S <pid> <token> <begin> <end> <read> <write> <lost> [<hold>]
//       a critical section: begun after the grant, ended before the release; <read> is the
//       value the store gave (-1: refused, -: not tried), <write> is 1 accepted, 0 refused,
//       - not tried; <lost> is 1 when the handle said lost() before the release.
//   P <pid> <from> <to>     the nemesis stopped the process (SIGSTOP) from..to
//   K <pid> <at>            the nemesis killed the process (SIGKILL)
//   X <pid> <at> <what>     partition or other fault affecting that process from <at> (free text)
//   R <from> <to> <server>  the nemesis restarted a server the workers use, from..to. It is no
//                           process's fault and excuses no overlap: a grant either outlives
//                           the restart or its holder is told lost.
// <hold> is lock (the default), read or write (a reader-writer lock's) or slot (a semaphore's).
//
// The invariants, each judged on the sections of one name (a run may work on several names at
// once, one primitive each), with "outside faults" meaning neither holder was paused, killed,
// cut off or told lost during its section (then safety rests on the token, and the fenced
// store's journal is judged instead):
//   1. a writer (a lock's holder, a reader-writer lock's writer) never overlaps any other
//      holder outside faults;
//   2. readers overlap only readers outside faults;
//   3. a semaphore's holders never exceed its max_count outside faults;
//   4. no two grants share a token, and tokens rise between sections that do not overlap where
//      one of them excludes the other (a lock's, a writer's): one release can admit two
//      readers, or two semaphore waiters, and each learns of it when it can, so among those
//      the tokens follow the queue, not the order in which the sections began;
//   5. the fenced store loses no increment and never accepts a token lower than one it has
//      seen (check_fenced_counter).
// A run proves something only if its faults landed inside sections: judge_faults() counts
// them, and the refusals of holders paused past their lease.
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

enum class hold { lock, read, write, slot };

struct section {
  pid_t pid = 0;
  std::uint64_t token = 0;
  std::int64_t begin = 0, end = 0;
  std::optional<std::int64_t> read;   ///< nullopt: refused, or not tried (read_tried)
  std::optional<bool> write_accepted; ///< nullopt: not tried
  bool lost = false;
  hold kind = hold::lock;
  bool read_tried = true;
  bool killed = false;  ///< begun, then killed: `end` is the kill

  /// Whether the fenced store refused a step of this section (its token was stale).
  bool refused() const { return (read_tried && !read) || write_accepted == false; }
};

struct fault_interval {
  pid_t pid = 0;
  std::int64_t from = 0, to = 0;  ///< a kill lasts to the end of the run
  char kind = 'P';                ///< the log line's letter: P, K or X
};

struct server_restart {
  std::int64_t from = 0, to = 0;
  std::string server;
};

struct history {
  std::vector<section> sections;
  std::vector<fault_interval> faults;
  std::vector<server_restart> restarts;

  /// The sections of these kinds (one name's, in a run over several), with every fault.
  history only(std::initializer_list<hold> kinds) const;
};

/// Appends one line to the log at `path` (creating it) in one write(2).
void append_history_line(const std::filesystem::path& path, const std::string& line);

/// Reads a log. Throws std::runtime_error naming the first malformed line, or a section that
/// began and never ended though its process was not killed.
history read_history(const std::filesystem::path& path);

struct verdict {
  std::size_t sections = 0;
  std::size_t accepted_writes = 0;
  std::size_t overlaps = 0;           ///< pairs of sections that overlapped in time
  std::size_t excused_overlaps = 0;   ///< ... whose holders may: readers, or one was faulted
  std::vector<std::string> violations;
};

/// Invariants 1 and 4 over the lock sections.
verdict check_fenced_mutex(const history& h);

/// Invariants 1, 2 and 4 over the read and write sections.
verdict check_reader_writer(const history& h);

/// Invariants 3 and 4 over the slot sections of a semaphore of `max_count`.
verdict check_semaphore(const history& h, std::uint32_t max_count);

/// Invariant 5 over the fenced counter's journal (fenced_store::journal_path()): every accepted
/// write stored the value before it plus one, and tokens never went back. Returns the
/// violations.
std::vector<std::string> check_fenced_counter(const std::filesystem::path& journal);

struct fault_expectations {
  /// Fewer faults landed inside a section than this fails the run: it proved nothing.
  std::size_t min_landed = 20;
  /// The backend's lease (nullopt where a paused holder keeps its grant: files). When a lock
  /// or write section was paused longer than this, at least one step must have been refused.
  std::optional<std::int64_t> lease_ns;
  /// Fewer sections that outlasted a server restart, struck by no other fault (held or told
  /// lost across it), than this fails the run: only such a section shows what a restart did.
  std::size_t min_sections_across_restart = 0;
};

struct fault_figures {
  std::size_t faults = 0;
  std::size_t landed = 0;  ///< faults begun inside a section of their process (restarts: any)
  std::size_t landed_kills = 0;
  std::size_t paused_past_lease = 0;  ///< lock and write sections paused longer than the lease
  std::size_t refusals = 0;           ///< sections the fenced store refused a step of
  std::size_t restarts = 0;           ///< server restarts (also counted in faults)
  std::size_t landed_restarts = 0;    ///< ... begun while a section was open (also in landed)
  /// Sections spanning a restart whose process the nemesis left alone: not told lost, told lost.
  std::size_t held_across_restart = 0;
  std::size_t lost_across_restart = 0;
  std::vector<std::string> violations;
};

/// Counts the faults that landed, the refusals and what restarts did to the sections they
/// struck, and holds them to `expected`.
fault_figures judge_faults(const history& h, const fault_expectations& expected);

}  // namespace support
