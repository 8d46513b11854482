// What the file backend can tell an inspector, and an administrator's break (docs/file.md,
// "What inspect can see"): holders from /proc/locks, their owners from the holder record.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "holder_record.hpp"
#include "lock_files.hpp"

namespace dlock::file::detail {

namespace {

bool stat_of(const std::filesystem::path& path, struct stat& file) {
  return ::stat(path.c_str(), &file) == 0;
}

// What a holder without a record is known by: its process.
std::string process_of(int pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string program;
  std::getline(comm, program);
  return "pid " + std::to_string(pid) + (program.empty() ? "" : " " + program);
}

// The holders of one file: a record is believed only for the LOCK_EX of the pid that wrote it.
void add_holders(const std::vector<flock_entry>& entries, const std::filesystem::path& path,
                 party_kind exclusive_kind, std::vector<lock_party>& holders) {
  struct stat file {};
  if (!stat_of(path, file)) return;
  for (const flock_entry& entry : entries) {
    if (!locks_file(entry, file)) continue;
    lock_party party{.kind = entry.exclusive ? exclusive_kind : party_kind::read};
    const auto record = entry.exclusive ? read_holder_record(path) : std::nullopt;
    if (record && record->pid == entry.pid) {
      party.kind = record->kind;
      party.fencing_token = record->fencing_token;
      party.since = record->since;
      party.owner = record->owner;
    } else {
      party.owner = process_of(entry.pid);
    }
    holders.push_back(std::move(party));
  }
}

std::optional<std::uint32_t> recorded_max_count(const std::filesystem::path& semaphore_file) {
  std::ifstream in(semaphore_file, std::ios::binary);
  std::string header;
  if (!in || !std::getline(in, header) || !std::getline(in, header)) return std::nullopt;
  unsigned count = 0;
  if (std::sscanf(header.c_str(), "max_count=%u", &count) != 1 || count == 0) return std::nullopt;
  return count;
}

// "<stem>.semaphore.<digits>" -> true, with `stem` set.
bool is_slot_file(std::string_view file, std::string& stem) {
  const auto dot = file.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == file.size()) return false;
  const auto digits = file.substr(dot + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  constexpr std::string_view semaphore = ".semaphore";
  const auto base = file.substr(0, dot);
  if (!base.ends_with(semaphore)) return false;
  stem = std::string(base.substr(0, base.size() - semaphore.size()));
  return true;
}

// The name behind an escaped file stem (naming::escape_segment, undone); a stem cut to a
// hash cannot be undone and is returned as it is.
std::string unescaped(std::string_view stem) {
  if (stem.find('~') != std::string_view::npos) return std::string(stem);
  std::string name;
  for (std::size_t i = 0; i < stem.size(); ++i) {
    unsigned byte = 0;
    if (stem[i] == '%' && i + 2 < stem.size() &&
        std::sscanf(std::string(stem.substr(i + 1, 2)).c_str(), "%2X", &byte) == 1) {
      name += static_cast<char>(byte);
      i += 2;
    } else {
      name += stem[i];
    }
  }
  return name;
}

void sort_by_since(std::vector<lock_party>& parties) {
  std::stable_sort(parties.begin(), parties.end(), [](const auto& a, const auto& b) {
    return a.since.value_or(std::chrono::system_clock::time_point::max()) <
           b.since.value_or(std::chrono::system_clock::time_point::max());
  });
}

}  // namespace

lock_inspection file_backend::inspect(const std::string& name) {
  lock_inspection found{.name = name};
  // A waiter tries with LOCK_NB and watches the directory: nothing shows it (docs/file.md).
  found.waiters_visible = false;
  try {
    const auto entries = flock_entries();
    add_holders(entries, directory_ / lock_file_name(name), party_kind::exclusive,
                found.holders);
    const auto semaphore = directory_ / semaphore_file_name(name);
    found.max_count = recorded_max_count(semaphore);
    for (std::uint32_t slot = 0; found.max_count && slot < *found.max_count; ++slot) {
      add_holders(entries, semaphore.string() + "." + std::to_string(slot),
                  party_kind::semaphore_slot, found.holders);
    }
    if (found.holders.empty()) found.max_count.reset();
  } catch (const file_failure& failure) {
    throw connection_error(message(failure.what, name));
  }
  sort_by_since(found.holders);
  return found;
}

std::vector<lock_inspection> file_backend::list_locks(const std::string& prefix) {
  std::map<std::string, std::filesystem::path> held;  // stem -> a flocked file of it
  try {
    const auto entries = flock_entries();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(directory_, ec)) {
      const std::string file = entry.path().filename().string();
      std::string stem;
      if (file.ends_with(".lock")) {
        stem = file.substr(0, file.size() - std::string_view(".lock").size());
      } else if (!is_slot_file(file, stem)) {
        continue;
      }
      struct stat status {};
      if (held.count(stem) || !stat_of(entry.path(), status)) continue;
      if (std::any_of(entries.begin(), entries.end(),
                      [&](const flock_entry& e) { return locks_file(e, status); })) {
        held.emplace(stem, entry.path());
      }
    }
    if (ec) throw file_failure{"cannot list " + directory_.string() + ": " + ec.message()};
  } catch (const file_failure& failure) {
    throw connection_error(message(failure.what));
  }
  std::vector<lock_inspection> listed;
  for (const auto& [stem, path] : held) {
    // Any record, even one its writer left behind, names the file's lock exactly.
    const auto record = read_holder_record(path.string());
    const std::string name = record ? record->name : unescaped(stem);
    if (!name.starts_with(prefix)) continue;
    auto found = inspect(name);
    if (found.held()) listed.push_back(std::move(found));
  }
  return listed;
}

// Replacing a file (rename over it) is what the holders' monitors look for: inotify reports it
// at once, and the next check of a holder in another process finds its path naming another
// file. The replacement keeps the fencing counter, so the next grant's token is higher.
void file_backend::break_lock(const std::string& name) {
  std::vector<std::filesystem::path> files{directory_ / lock_file_name(name),
                                           directory_ / gate_file_name(name)};
  const std::string semaphore = semaphore_file_name(name);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, ec)) {
    std::string stem;
    const std::string file = entry.path().filename().string();
    if (is_slot_file(file, stem) && file.starts_with(semaphore + ".")) {
      files.push_back(entry.path());
    }
  }
  if (ec) throw connection_error(message("cannot list the lock directory: " + ec.message(), name));
  for (const auto& path : files) {
    struct stat status {};
    if (!stat_of(path, status)) continue;
    const auto replacement =
        path.string() + ".break-" + std::to_string(::getpid());
    {
      std::ofstream out(replacement, std::ios::binary | std::ios::trunc);
      out << read_counter_bytes(path.string());
      if (!out) throw connection_error(message("cannot write " + replacement, name));
    }
    std::filesystem::rename(replacement, path, ec);
    if (ec) {
      std::filesystem::remove(replacement, ec);
      throw connection_error(message("cannot replace " + path.string() + ": " + ec.message(), name));
    }
  }
}

}  // namespace dlock::file::detail
